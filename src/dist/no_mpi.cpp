// The build without MPI: every run is one process.
#include "dist/communicator.h"

namespace gatedlm::dist {

std::unique_ptr<Communicator> from_environment() { return single_process(); }

std::string mpi_build_info() { return "not built in, training runs in one process"; }

}  // namespace gatedlm::dist
