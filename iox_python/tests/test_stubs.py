"""The type stubs that ship with the package (iox/__init__.pyi, iox/_iox.pyi) name
everything the package exports, and every public method and property of the tensor
ports: a stub that forgets a class or call is what a type checker (and an editor's
completion) then refuses."""
import ast
import os

import iox

STUBS = os.path.join(os.path.dirname(iox.__file__))


def stub_names(name):
    with open(os.path.join(STUBS, name)) as f:
        tree = ast.parse(f.read())
    names, methods = set(), {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef):
            names.add(node.name)
            methods[node.name] = {n.name for n in node.body
                                  if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.ImportFrom):
            names.update(a.asname or a.name for a in node.names)
    return names, methods


def test_every_export_is_in_the_stubs():
    names, _ = stub_names("__init__.pyi")
    missing = [n for n in iox.__all__ if n not in names]
    assert not missing, f"exported but not in iox/__init__.pyi: {missing}"


def test_the_tensor_and_request_response_ports_calls_are_in_the_stubs():
    _, methods = stub_names("_iox.pyi")
    for cls in ("TensorPublisher", "TensorLoan", "TensorSubscriber", "TensorSample", "RequestResponseService",
                "Client", "PendingResponse", "Response", "Server", "ActiveRequest"):
        public = {m for m in dir(getattr(iox, cls)) if not m.startswith("_") or m in ("__dlpack__",)}
        assert cls in methods, f"{cls} is not in iox/_iox.pyi"
        missing = public - methods[cls]
        assert not missing, f"{cls} has {sorted(missing)} that iox/_iox.pyi does not name"
    _, init = stub_names("__init__.pyi")
    assert "tensors" in init["PubSubBuilder"]
    assert {"tensor_publisher", "tensor_subscriber"} <= methods["PubSubService"]
