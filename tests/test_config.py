"""agent.toml -> AgentConfig: defaults agree with the file, overrides apply, faults are
one-line BadInput errors naming the file."""
from __future__ import annotations

import dataclasses
import re
import tomllib

import pytest

from agent import DEFAULT_CONFIG
from agent.config import AGENT_TABLES, AgentConfig, load_config
from tools.errors import BadInput
from tools import settings

# every agent.toml table and the dataclass that holds it, the lead's evaluator tables included
ALL_TABLES = {**AGENT_TABLES, "eval": settings.TrialSettings, "timing": settings.TimingSettings,
              "guards": settings.GuardSettings}


def _write(tmp_path, text: str):
    path = tmp_path / "agent.toml"
    path.write_text(text)
    return path


def test_repo_agent_toml_loads_to_the_dataclass_defaults():
    assert load_config() == AgentConfig()


@pytest.mark.parametrize("table", sorted(ALL_TABLES))
def test_agent_toml_values_equal_the_dataclass_defaults(table):
    doc = tomllib.loads(DEFAULT_CONFIG.read_text())
    cls = ALL_TABLES[table]
    defaults = {f.name: (f.default if f.default is not dataclasses.MISSING else f.default_factory())
                for f in dataclasses.fields(cls)}
    written = doc[table]
    assert written == {k: defaults[k] for k in written}
    # a knob may be left out of the file only when its default is "unset" (None)
    assert {k for k, v in defaults.items() if k not in written} == {k for k, v in defaults.items() if v is None}


@pytest.mark.parametrize("table", sorted(ALL_TABLES))
def test_every_knob_is_written_or_commented_in_agent_toml(table):
    text = DEFAULT_CONFIG.read_text()
    for f in dataclasses.fields(ALL_TABLES[table]):
        assert re.search(rf"^#?\s*{f.name}\s*=", text, re.M), f"[{table}] {f.name} is not in agent.toml"


def test_overrides_replace_values_and_keep_the_rest():
    config = load_config(overrides={"budget.max_rounds": 3, "model.id": "replay:x.jsonl",
                                    "eval.trials": 2, "run.device": "cpu"})
    assert (config.budget.max_rounds, config.model.id, config.eval.test.trials, config.run.device) == \
        (3, "replay:x.jsonl", 2, "cpu")
    assert config.budget.candidates_per_round == AgentConfig().budget.candidates_per_round


def test_none_override_is_skipped_like_an_unset_flag():
    assert load_config(overrides={"budget.max_rounds": None}) == AgentConfig()


def test_a_partial_file_keeps_the_defaults_for_missing_keys(tmp_path):
    config = load_config(_write(tmp_path, "[budget]\nmax_rounds = 2\n"))
    assert config.budget.max_rounds == 2
    assert dataclasses.replace(config, budget=AgentConfig().budget) == AgentConfig()


def test_unknown_key_is_bad_input_naming_the_file_and_the_key(tmp_path):
    path = _write(tmp_path, "[budget]\nmax_round = 2\n")
    with pytest.raises(BadInput, match=r"agent\.toml: \[budget\]: unknown key\(s\) max_round") as e:
        load_config(path)
    assert "\n" not in str(e.value)


def test_unknown_table_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"unknown table\(s\) \[budgets\]"):
        load_config(_write(tmp_path, "[budgets]\nmax_rounds = 2\n"))


def test_wrong_type_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"\[sampling\]\.temperature: expected a number"):
        load_config(_write(tmp_path, '[sampling]\ntemperature = "hot"\n'))


def test_value_outside_a_literal_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"\[search\]\.strategy: 'random' is not one of"):
        load_config(_write(tmp_path, '[search]\nstrategy = "random"\n'))


def test_value_out_of_range_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match=r"agent\.toml: \[budget\]: max_rounds must be at least 1, got 0$"):
        load_config(_write(tmp_path, "[budget]\nmax_rounds = 0\n"))


def test_malformed_toml_is_bad_input_naming_the_file(tmp_path):
    path = _write(tmp_path, "[budget\nmax_rounds = 2\n")
    with pytest.raises(BadInput, match=rf"^{re.escape(str(path))}: not valid TOML") as e:
        load_config(path)
    assert "\n" not in str(e.value)


def test_missing_file_is_bad_input(tmp_path):
    with pytest.raises(BadInput, match="no such config file"):
        load_config(tmp_path / "nope.toml")


def test_a_config_path_that_is_a_fifo_is_bad_input_not_a_hang(tmp_path):
    import os
    fifo = tmp_path / "agent.toml"
    os.mkfifo(fifo)
    with pytest.raises(BadInput, match="config path is not a regular file"):
        load_config(fifo)


@pytest.mark.parametrize("key, value, fault", [
    ("eval.atol_fp32", -1.0, "atol_fp32 must be at least 0"),
    ("eval.rel_l2_half", -0.5, "rel_l2_half must be at least 0"),
    ("eval.max_output_kib", -1, "max_output_kib must be at least 1"),
    ("eval.max_file_mib", 0, "max_file_mib between 1 and"),
    ("eval.max_file_mib", 1 << 60, "max_file_mib between 1 and"),      # RLIMIT_FSIZE overflowed: exit 3
    ("eval.cpu_memory_gib", -1.0, "cpu_memory_gib must be 0 (no limit) or between 2"),
    ("eval.cpu_memory_gib", 1e300, "cpu_memory_gib must be 0 (no limit) or between 2"),
    ("eval.cpu_memory_gib", 0.001, "cpu_memory_gib must be 0 (no limit) or between 2"),   # blamed the candidate
    ("eval.init_seed", 10 ** 23, "init_seed must fit in 64 bits"),           # blamed the problem
    ("model.request_timeout_s", 1e308, "request_timeout_s must be between"),
    ("eval.reference_timeout_s", 0.0, "timeouts must be positive and at most 604800 seconds"),
    ("eval.compile_timeout_s", 1e308, "timeouts must be positive and at most 604800 seconds"),   # a week is a hang
    ("timing.warmup", -1, "warmup must be at least 0"),
    ("timing.excessive_speedup", 0.0, "excessive_speedup and host_check_ratio must be positive"),
])
def test_an_evaluator_value_out_of_range_is_bad_input_naming_it(key, value, fault):
    with pytest.raises(BadInput, match=re.escape(fault)):
        load_config(None, {key: value})


def test_override_of_wrong_type_is_bad_input_that_names_the_override():
    with pytest.raises(BadInput, match=r"^override budget\.max_rounds: expected an integer, got 'three'$"):
        load_config(overrides={"budget.max_rounds": "three"})


def test_override_of_unknown_table_is_bad_input():
    with pytest.raises(BadInput, match="override 'budgett.max_rounds'"):
        load_config(overrides={"budgett.max_rounds": 3})


def test_without_the_repo_agent_toml_the_defaults_still_load(tmp_path, monkeypatch):
    monkeypatch.setattr("agent.config.DEFAULT_CONFIG", tmp_path / "absent.toml")
    monkeypatch.chdir(tmp_path)           # no ./agent.toml either
    assert load_config(overrides={"budget.max_rounds": 2}).budget.max_rounds == 2


@pytest.mark.parametrize("literal", ["nan", "inf", "-inf"])
def test_a_non_finite_number_in_the_file_is_bad_input(tmp_path, literal):
    path = _write(tmp_path, f"[budget]\ntarget_speedup = {literal}\n")
    with pytest.raises(BadInput, match="expected a finite number"):
        load_config(path)


def test_unknown_bench_key_is_bad_input_naming_it(tmp_path):
    with pytest.raises(BadInput, match=r"\[bench\]: unknown key\(s\) ray_adress"):
        load_config(_write(tmp_path, '[bench]\nray_adress = "auto"\n'))


@pytest.mark.parametrize("address", ["auto", "local", "10.0.0.1:6379", "head-node:6379", "ray://head:10001"])
def test_ray_addresses_ray_init_takes_are_accepted(address):
    assert load_config(overrides={"bench.ray_address": address}).bench.ray_address == address


@pytest.mark.parametrize("address", ["head", "http://head:6379", "head:port", "auto "])
def test_a_ray_address_that_does_not_parse_is_bad_input(address):
    with pytest.raises(BadInput, match=r"^override bench\.ray_address '.*': expected auto, local, HOST:PORT or ray://HOST:PORT$"):
        load_config(overrides={"bench.ray_address": address})


@pytest.mark.parametrize("flag, value, fault", [
    ("--candidates", "0", "must be at least 1, got 0"),
    ("--max-iterations", "-2", "must be at least 1, got -2"),
    ("--target-speedup", "0", "must be positive, got 0"),
    ("--time-budget", "-5", "must be positive, got -5"),
])
def test_a_run_flag_out_of_range_is_blamed_on_the_flag_not_the_config_file(flag, value, fault, capsys):
    from agent.cli import main
    assert main(["run", str(DEFAULT_CONFIG.parent / "examples" / "relu.py"), flag, value]) == 2
    assert capsys.readouterr().err == f"krefine: error: {flag} {fault}\n"


def test_an_override_is_named_as_its_origin_says(tmp_path):
    with pytest.raises(BadInput, match=r"^--set sampling\.top_k must be at least 0, got -1$"):
        load_config(overrides={"sampling.top_k": -1}, origins={"sampling.top_k": "--set sampling.top_k"})


def test_a_fault_of_the_file_is_still_the_files_when_overrides_are_given(tmp_path):
    path = _write(tmp_path, "[budget]\nmax_rounds = 0\n")
    with pytest.raises(BadInput, match=r"agent\.toml: \[budget\]: max_rounds must be at least 1, got 0$"):
        load_config(path, {"budget.candidates_per_round": 2}, {"budget.candidates_per_round": "--candidates"})


def test_a_server_url_without_a_scheme_in_the_file_is_bad_input_with_a_hint(tmp_path):
    key, text = "id", "openai:localhost:59999"
    path = _write(tmp_path, f'[model]\n{key} = "{text}"\n')
    with pytest.raises(BadInput, match=rf"\[model\]: {key} '{text}': the server URL needs a scheme, "
                                       r"e\.g\. openai:http://localhost:59999$"):
        load_config(path)


# --- krefine run --set, as krefine bench --set (issue 20)

def _run_config(monkeypatch, *argv):
    """The config krefine run would start with for `argv` (the loop itself not run)."""
    from agent.cli import main, runcmd
    seen = {}
    monkeypatch.setattr(runcmd, "run_problem", lambda problem, config, out, **kw: seen.setdefault("c", config)
                        or {"solved": True})
    main(["run", str(DEFAULT_CONFIG.parent / "examples" / "relu.py"), *argv])
    return seen["c"]


def test_run_set_overrides_one_agent_toml_value(monkeypatch):
    assert _run_config(monkeypatch, "--set", "sampling.temperature=0.25").sampling.temperature == 0.25


def test_run_a_flag_wins_over_a_set_of_its_key(monkeypatch):
    assert _run_config(monkeypatch, "--set", "budget.max_rounds=7", "--max-iterations", "2").budget.max_rounds == 2


def test_run_set_without_an_equals_sign_is_one_line_and_exit_2(capsys):
    from agent.cli import main
    assert main(["run", str(DEFAULT_CONFIG.parent / "examples" / "relu.py"), "--set", "budget"]) == 2
    assert capsys.readouterr().err == "krefine: error: --set 'budget': expected TABLE.KEY=VALUE\n"


# --- one knob per concept: one key name, one flag spelling (issues 20, 48)

RELU = str(DEFAULT_CONFIG.parent / "examples" / "relu.py")


@pytest.mark.parametrize("flag", ["--seed", "--min-speedup", "--max-rounds"])
def test_a_removed_run_flag_spelling_is_a_usage_error(capsys, flag):
    from agent.cli import main
    assert main(["run", RELU, flag, "3"]) == 2
    assert capsys.readouterr().err == f"krefine: error: unrecognized arguments: {flag} 3\n"


def test_eval_min_speedup_is_its_one_spelling_of_the_target():
    from agent.cli import build_parser
    parse = build_parser().parse_args
    assert parse(["eval", "p.py", "c.py", "--min-speedup", "1.5"]).target_speedup == 1.5
    with pytest.raises(BadInput, match="unrecognized arguments: --target-speedup"):
        parse(["eval", "p.py", "c.py", "--target-speedup", "1.5"])


def test_run_model_flag_is_the_model_id_key(monkeypatch):
    assert _run_config(monkeypatch, "--model", "replay:x.jsonl").model.id == "replay:x.jsonl"


def test_bench_ray_flag_sets_bench_ray_address():
    from agent.bench.suite import make_settings, parse_options
    setting, = make_settings(parse_options(["--ray", "local"]))
    assert load_config(None, setting.overrides).bench.ray_address == "local"


@pytest.mark.parametrize("text, key", [('[search]\nseed = "inductor"\n', "seed"),
                                       ('[model]\nopenai_base_url = "http://h:8000"\n', "openai_base_url")])
def test_a_removed_key_name_is_an_unknown_key(tmp_path, text, key):
    with pytest.raises(BadInput, match=rf"\]: unknown key\(s\) {key}; known: "):
        load_config(_write(tmp_path, text))


def test_run_help_lists_set(capsys):
    from agent.cli import main
    with pytest.raises(SystemExit):
        main(["run", "--help"])
    assert "--set TABLE.KEY=VALUE" in capsys.readouterr().out


def test_an_agent_toml_in_the_working_directory_is_read(tmp_path, monkeypatch):
    (tmp_path / "agent.toml").write_text("[budget]\nmax_rounds = 7\n")
    monkeypatch.chdir(tmp_path)
    assert load_config().budget.max_rounds == 7


def test_without_one_the_checkouts_agent_toml_is_read(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert load_config().budget.max_rounds == load_config(DEFAULT_CONFIG).budget.max_rounds


@pytest.mark.parametrize("argv,said", [
    (["run", "examples/relu.py", "--gpux", "3"], "krefine: error: unrecognized arguments: --gpux 3\n"),
    (["run"], "krefine: error: run: the following arguments are required: problem\n"),
])
def test_a_usage_error_is_one_line_that_names_the_program_once(argv, said, capsys):
    from agent.cli import main
    assert main(argv) == 2 and capsys.readouterr().err == said


def test_a_negative_templates_budget_is_refused_by_name():
    with pytest.raises(BadInput, match=r"^--set search\.templates_timeout_s must be at least 0, got -1$"):
        load_config(overrides={"search.templates_timeout_s": -1.0},
                    origins={"search.templates_timeout_s": "--set search.templates_timeout_s"})


def test_a_config_file_past_the_size_cap_is_bad_input_not_read(tmp_path):
    big = tmp_path / "agent.toml"
    with big.open("wb") as f:
        f.truncate(1 << 40)   # sparse: a TiB that would exhaust memory if read
    with pytest.raises(BadInput, match="MiB"):
        load_config(big)
