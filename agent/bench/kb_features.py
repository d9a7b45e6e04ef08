"""What in a KernelBench reference's source can make two sound judges disagree (`features`):
a convolution (cuDNN's TF32 under torch's default flags), integer inputs (KernelBench casts every
input to its precision), and a random draw (Dropout that may draw, torch.rand* in forward).
Read from the source alone (the standard library's ast and re); runs nothing.
"""
from __future__ import annotations

import ast
import re

_CONV = re.compile(r"\b(nn\.Conv(Transpose)?[123]d|(F|functional)\.conv(_transpose)?[123]d|torch\.conv(_transpose)?[123]d)\b")
_INT_INPUT = re.compile(r"\b(randint|randperm)\s*\(|dtype\s*=\s*torch\.(long|int(8|16|32|64)?|uint8|bool)\b")
_DROPOUT = re.compile(r"\b(nn\.\w*Dropout\w*|F\.\w*dropout\w*|torch\.\w*dropout\w*)\s*\(")
_RANDOM = re.compile(r"\btorch\.((rand|randn|randint)(_like)?|randperm|bernoulli|multinomial|normal|poisson)\s*\(|"
                     r"\.(bernoulli_|normal_|uniform_|exponential_|random_)\s*\(")


def features(ref_src: str) -> list[str]:
    """"conv" (a cuDNN convolution in the reference), "stochastic" (Dropout, or a random draw
    in forward: no kernel can match the reference's draws), "integer_inputs" (get_inputs
    makes an integer tensor, e.g. class targets)."""
    model = _class_source(ref_src, "Model") or ref_src
    forward = _method_source(model, "forward") or ""
    found = []
    if _INT_INPUT.search(ref_src.split("def get_inputs", 1)[-1]):
        found.append("integer_inputs")
    if _CONV.search(ref_src.split("def get_inputs", 1)[0]):   # Model's submodules' classes too (a patch embedding)
        found.append("conv")
    if _random_dropout(model) or _RANDOM.search(forward):
        found.append("stochastic")
    return found


def _random_dropout(model: str) -> bool:
    """A Dropout in `model` (Model's source) that may draw: any but one whose rate is a
    literal 0 (`nn.Dropout(0.0)`, `nn.Dropout(p=0.0)`, `F.dropout(x, 0.0)`), or a functional
    one called with a literal `training=False`, neither of which draws. A rate held in a
    variable counts as drawing: the source cannot tell."""
    try:
        tree = ast.parse(model)
    except SyntaxError:
        return bool(_DROPOUT.search(model))
    for call in (n for n in ast.walk(tree) if isinstance(n, ast.Call)):
        name = ast.unparse(call.func)
        if not _DROPOUT.fullmatch(name + "("):
            continue
        functional = not name.rsplit(".", 1)[-1][:1].isupper()      # F.dropout(x, p, training), torch.dropout
        kw = {k.arg: k.value for k in call.keywords}
        p = kw.get("p", call.args[1 if functional else 0] if len(call.args) > (1 if functional else 0) else None)
        training = kw.get("training", kw.get("train", call.args[2] if functional and len(call.args) > 2 else None))
        if _literal(p) == 0 or (functional and training is not None and _literal(training) is False):
            continue
        return True
    return False


def _literal(node):
    try:
        return ast.literal_eval(node) if node is not None else None
    except ValueError:
        return None


def _class_source(src: str, name: str) -> str | None:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return None
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    return ast.get_source_segment(src, node) if node else None


def _method_source(cls_src: str, name: str) -> str | None:
    try:
        tree = ast.parse(cls_src)
    except SyntaxError:
        return None
    for cls in tree.body:
        for n in getattr(cls, "body", []):
            if isinstance(n, ast.FunctionDef) and n.name == name:
                return ast.get_source_segment(cls_src, n)
    return None
