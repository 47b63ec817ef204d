"""The type stubs ship beside the module and name everything it has, so that editors complete
the whole API (docs/python.md, "Install"). Run against the build tree (python_package) and
against the installed wheel (python_wheel): the stubs checked are the ones next to the module
imported."""
import ast
import os

import gatedlm
from gatedlm import _gatedlm


def stub_names():
    here = os.path.dirname(os.path.abspath(_gatedlm.__file__))
    assert os.path.isfile(os.path.join(here, "py.typed")), f"{here} has no py.typed"
    with open(os.path.join(here, "_gatedlm.pyi"), encoding="utf-8") as f:
        tree = ast.parse(f.read())

    def names(body):
        out = set()
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                out.add(node.name)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                out.add(node.target.id)
            elif isinstance(node, ast.Assign):
                out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        return out

    classes = {node.name: names(node.body) for node in tree.body if isinstance(node, ast.ClassDef)}
    return names(tree.body), classes


def test_the_stubs_name_every_function_class_and_method_of_the_module():
    top, classes = stub_names()
    missing = [name for name in vars(_gatedlm) if not name.startswith("__") and name not in top]
    for cls_name, members in classes.items():
        cls = getattr(_gatedlm, cls_name, None)
        assert cls is not None, f"_gatedlm.pyi has a class {cls_name} the module does not"
        missing += [f"{cls_name}.{name}" for name in vars(cls) if not name.startswith("_") and name not in members]
    assert not missing, f"_gatedlm.pyi lacks {missing}: add them to python/gatedlm/_gatedlm.pyi"
    assert set(gatedlm.__all__) <= set(vars(gatedlm))
