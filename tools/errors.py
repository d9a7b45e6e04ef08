"""The two exceptions that cross the CLI boundary, and their exit statuses.

BadInput: the user's file or flag is wrong (exit 2, one line naming the file).
EvaluatorError: the evaluator itself could not work (GPU unusable, worker could not
start; exit 3). Faults of candidate code are never exceptions: they are verdicts.
`describe_fault` is the one-line form of an exception that either message quotes;
`describe_compile_error` the one line for a failed torch.compile (a seed's reason).
"""
from __future__ import annotations

EXIT_OK, EXIT_FAIL, EXIT_BAD_INPUT, EXIT_EVALUATOR = 0, 1, 2, 3


class BadInput(Exception):
    """A malformed problem, candidate, config or flag. str() is the whole one-line message."""

    def __init__(self, path: object, fault: str):
        self.path, self.fault = str(path), " ".join(str(fault).split())
        super().__init__(f"{self.path}: {self.fault}" if self.path else self.fault)


class EvaluatorError(Exception):
    """The evaluator could not do its job (not the candidate's fault)."""


class JudgeShutDown(EvaluatorError):
    """The judge shut down (Ctrl-C, SIGTERM, a bench's time limit) while a candidate's
    process ran: that process was killed by the shutdown, so there is no verdict to record
    and a resumed run judges the candidate again."""


# a one-line message's longest quote of an exception: cut between words, never inside one
FAULT_CHARS = 600


def one_line(text: str, width: int = FAULT_CHARS) -> str:
    """`text` on one line, at most `width` characters, cut only between words ("…" says
    where); for messages that must stay one line. A reason kept in a file is kept whole."""
    flat = " ".join(str(text).split())
    cut = flat.rfind(" ", 0, width - 1) if len(flat) > width else -1
    return flat[:cut] + " …" if cut > 0 else flat


def describe_fault(e: BaseException) -> str:
    """`Type: message` on one line (one_line: a long message cut between words)."""
    msg = one_line(str(e))
    return f"{type(e).__name__}: {msg}" if msg else type(e).__name__


def describe_compile_error(e: Exception) -> str:
    """One line for a failed torch.compile: a Dynamo graph break as its kind, its
    explanation and the user's line (`Data-dependent branching ... at model.py:7 `if
    mask.any():``), not the hints and links around them; anything else as it is."""
    import re
    text = str(e)
    where = re.findall(r'File "([^"]+)", line (\d+), in \w+\n\s*(.+)', text.partition("from user code:")[2])
    sized = "GuardOnDataDependentSymNode" in text or "data-dependent expression" in text
    if not where and sized:   # Inductor's lowering: the op that needs the size, under "Found from"
        where = re.findall(r'File "([^"]+)", line (\d+), in \w+\n\s*(.+)', text.partition("Found from")[2])
    if not where and sized:   # no line named (aot's functional_call): what a data-dependent number is, said plainly
        return (f"{type(e).__name__}: the forward uses a tensor's value as a number (an index or a size: `a[t]` with "
                "a 0-dim integer tensor t, `.item()`, `int(t)`), which a seed fixes when it is made; index with a "
                "1-element tensor (`a[t.view(1)]`) or torch.gather")
    if not where:
        return f"{type(e).__name__}: {one_line(text, FAULT_CHARS - len(type(e).__name__) - 2)}"
    kind = text.strip().splitlines()[0].strip()
    devices = re.search(r"found two different devices ([\w:]+), ([\w:]+)", text)
    if devices:   # a tensor made without device= in the forward: eager fails alike
        kind = (f"the forward mixes tensors on {devices.group(1)} and {devices.group(2)}, as Model itself does there "
                "(a tensor made in the forward without device=, or a plain tensor attribute model.to() does not "
                "move); make it on the input's device (device=x.device) or hold it as a buffer")
    if sized and "from user code:" not in text:
        kind = ("the forward reads a tensor's value into a size (`.item()`, `int(t)`: a data-dependent shape) that "
                "an op needs fixed; a seed's sizes are fixed when it is made")
    if "Could not extract specialized integer" in text:   # `cache[self.n % 4] = k`: an index, no branch
        kind = ("the forward uses a tensor's value as a number (an index: `a[t]` with a 0-dim integer tensor t, "
                "`.item()`, `int(t)`), which a seed fixes when it is made; index with a 1-element tensor "
                "(`a[t.view(1)]`), index_copy_ or torch.gather")
    autograd = "trace_autograd_ops" in text
    if autograd:   # Dynamo's words name a setting; what the user can change is the call
        kind = "the forward calls torch.autograd.grad, which torch.compile does not trace; torch.func.grad does"
    why = re.search(r"Explanation:\s*(.+)", text)
    if re.search(r"Size-like symbols: u\d", text) and "data-dependent" in kind and not why:
        kind = ("the forward makes a tensor whose size depends on values (x[mask], nonzero, where(cond)), which a "
                "later op needs fixed; a seed's sizes are fixed when it is made: keep the full size and mask it "
                "(torch.where, masked_fill)")   # `torch.logsumexp(sim[pos_mask], 0)` was said to branch
    if "aten.equal" in text:   # torch.cov / corrcoef compare inside torch
        kind = ("the forward compares tensors into a Python bool (torch.equal; torch.cov and torch.corrcoef do it "
                "inside torch), which one graph cannot hold; write the covariance out: xc = x - x.mean(1, "
                "keepdim=True); xc @ xc.T / (n - 1)")
        why = None
    if "data-dependent" in kind and not why and not kind.startswith(("the forward reads", "the forward uses")):   # a value test inside torch (F.gaussian_nll_loss: `torch.any(var < 0)`)
        kind = "the forward branches on tensor values, which one graph cannot hold"
    own = [w for w in where if "/torch/" not in w[0]]   # the problem's own line, then torch's beneath it
    path, line, code = (own or where)[-1]
    said = f"{kind}: {why.group(1).strip()}" if why and not devices and not autograd else kind
    inner = f"; in torch's {where[-1][0].rsplit('/', 1)[-1]}:{where[-1][1]}" if own and own[-1] != where[-1] else ""
    return f"{type(e).__name__}: {said} (at {path.rsplit('/', 1)[-1]}:{line} `{code.strip()}`{inner})"


def check_writable(path, what: str, *, directory: bool) -> None:
    """BadInput naming `path` unless krefine can write it: a `directory` (a run's or a bench's
    --out) that is one already or can be made, its nearest existing ancestor a directory it
    may write in; a file (export's -o, report.html) that is not a directory, in a directory
    that exists and may be written. Checked before the work, so a path that cannot be written
    costs nothing and says so in one line (exit 2), not as an internal error after it."""
    import os
    from pathlib import Path
    p = Path(path)
    if p.is_dir():
        if directory:
            if not os.access(p, os.W_OK | os.X_OK):
                raise BadInput(p, f"{what}: the directory is not writable")
            return
        raise BadInput(p, f"{what}: is a directory; name a file")
    if p.exists() or p.is_symlink():
        if directory:
            raise BadInput(p, f"{what}: exists and is not a directory")
        if not os.access(p, os.W_OK):
            raise BadInput(p, f"{what}: the file is not writable")
    parent = p.absolute().parent
    if not directory and not parent.is_dir():
        raise BadInput(p, f"{what}: {parent} is not a directory" if parent.exists() else
                       f"{what}: no such directory {parent}")
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        raise BadInput(p, f"{what}: {parent} is not a directory")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise BadInput(p, f"{what}: cannot create it in {parent} (not writable)")
