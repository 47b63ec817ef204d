// gatedlm.Tokenizer: io::Tokenizer (byte, SentencePiece .model, tokenizer.json).
#include "common.h"

namespace gatedlm::python {

void bind_tokenizer(py::module_& m) {
  py::class_<io::Tokenizer, std::shared_ptr<io::Tokenizer>>(
      m, "Tokenizer",
      "A tokenizer: \"byte\" (ids 0..255 are bytes, 256 BOS, 257 EOS), a SentencePiece .model file or a Hugging "
      "Face tokenizer.json, as the command line's --tokenizer.")
      .def(py::init([](const py::object& spec) { return tokenizer_from(py::str(path_string(spec))); }), py::arg("spec"),
           "Loads \"byte\", a SentencePiece .model or a tokenizer.json.")
      .def(
          "encode",
          [](const io::Tokenizer& t, const std::string& text, bool bos, bool eos) {
            std::vector<int32_t> ids;
            if (bos) ids.push_back(t.bos_id());
            {
              ReleaseGil release;
              for (int32_t id : t.encode(text)) ids.push_back(id);
            }
            if (eos) ids.push_back(t.eos_id());
            return ids;
          },
          py::arg("text"), py::arg("bos") = false, py::arg("eos") = false,
          "Text to token ids (a list of int). bos/eos: add the BOS id first / the EOS id last.")
      .def(
          "decode",
          [](const io::Tokenizer& t, const py::handle& ids) {
            const TokenBatch b = token_batch(ids, t.vocab_size(), "Tokenizer.decode");
            if (b.two_dims) throw py::value_error("Tokenizer.decode: give one 1-D sequence of ids");
            return utf8_text(t.decode(b.ids));
          },
          py::arg("ids"), "Token ids to text (invalid UTF-8 replaced by U+FFFD).")
      .def_property_readonly("vocab_size", &io::Tokenizer::vocab_size, "Number of ids.")
      .def_property_readonly("bos_id", &io::Tokenizer::bos_id, "The beginning-of-sequence id.")
      .def_property_readonly("eos_id", &io::Tokenizer::eos_id, "The end-of-sequence id.")
      .def_property_readonly("name", &io::Tokenizer::name, "\"byte\", or the model file's name as given.")
      .def("__repr__", [](const io::Tokenizer& t) {
        return cat("gatedlm.Tokenizer(", py::repr(py::str(t.name())).cast<std::string>(), ", vocab_size=",
                   t.vocab_size(), ")");
      });
}

}  // namespace gatedlm::python
