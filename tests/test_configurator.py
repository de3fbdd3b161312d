"""Config files and --key=value overrides: what is accepted and the one-line errors."""

import os

import pytest

import configurator
from configurator import ConfigError, configure
from conftest import ROOT

DEFAULTS = dict(batch_size=12, learning_rate=6e-4, compile=True, out_dir="out", block_types="tp")


def write(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_overrides_apply_in_order_and_are_typed(tmp_path):
    cfg = write(tmp_path, "a.py", "batch_size = 4\nlearning_rate = 1\n_private_helper = 3\nimport math\n")
    config, explicit = configure(DEFAULTS, [cfg, "--batch_size=8", "--compile=False", "--out_dir=runs/x",
                                            "--block_types=parallel,spd"])
    assert config == dict(batch_size=8, learning_rate=1.0, compile=False, out_dir="runs/x",
                          block_types="parallel,spd")
    assert isinstance(config["learning_rate"], float)  # an int is fine for a float key
    assert explicit == {"batch_size", "learning_rate", "compile", "out_dir", "block_types"}
    assert configure(DEFAULTS, ["--compile=true", "--out_dir='quoted'"])[0]["out_dir"] == "quoted"
    # an override given before a file still wins over it (as --help says), and files keep their order
    later = write(tmp_path, "b.py", "batch_size = 16\n")
    assert configure(DEFAULTS, ["--batch_size=8", cfg])[0]["batch_size"] == 8
    assert configure(DEFAULTS, ["--batch_size=8", later, "--batch_size=2", cfg])[0]["batch_size"] == 2
    assert configure(DEFAULTS, [later, cfg])[0]["batch_size"] == 4 and configure(DEFAULTS, [cfg, later])[0]["batch_size"] == 16


def test_include_starts_from_another_file(tmp_path):
    write(tmp_path, "base.py", "batch_size = 4\nout_dir = 'base'\n")
    child = write(tmp_path, "child.py", "include('base.py')\nout_dir = 'child'\n")
    config, _ = configure(DEFAULTS, [child])
    assert (config["batch_size"], config["out_dir"]) == (4, "child")


@pytest.mark.parametrize("argv, message", [
    (["--batch_sise=4"], "--batch_sise: unknown config key 'batch_sise'; did you mean 'batch_size'?"),
    (["--batch_size=4.5"], "--batch_size: batch_size must be int, got float 4.5"),
    (["--batch_size=four"], "--batch_size=four: not a valid int"),
    (["--learning_rate=fast"], "not a valid float"),
    (["--compile=maybe"], "not a valid bool"),
    (["--compile=1"], "compile must be bool, got int 1"),
    (["--batch_size"], "malformed argument '--batch_size': write --key=value"),
    (["batch_size=4"], "malformed argument 'batch_size=4'"),
    (["-b"], "malformed argument '-b'"),
    (["missing_config.py"], "config file 'missing_config.py' does not exist"),
])
def test_command_line_mistakes(argv, message):
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, argv)
    assert message in str(e.value)
    assert "\n" not in str(e.value)


@pytest.mark.parametrize("text, message", [
    ("bath_size = 4\n", "unknown config key 'bath_size'"),
    ("batch_size = '4'\n", "batch_size must be int, got str '4'"),
    ("batch_size = = 4\n", "line 1: syntax error"),
    ("batch_size = undefined_name\n", "NameError"),
    ("include('nope.py')\n", "does not exist"),
])
def test_config_file_mistakes(tmp_path, text, message):
    path = write(tmp_path, "bad.py", text)
    with pytest.raises(ConfigError) as e:
        configure(DEFAULTS, [path])
    assert message in str(e.value)
    assert "bad.py" in str(e.value) or "nope.py" in str(e.value)


def test_train_defaults_are_the_globals_of_train_py():
    """train_defaults() parses train.py; executing its config block must give the same dict."""
    with open(os.path.join(ROOT, "train.py")) as f:
        source = f.read()
    namespace = {}
    exec(source[:source.index("config_keys =")], namespace)
    executed = {k: v for k, v in namespace.items()
                if not k.startswith("_") and isinstance(v, (int, float, bool, str))}
    assert configurator.train_defaults() == executed
    assert {"tp_size", "block_types", "lr_decay_iters", "compile"} <= set(executed)


@pytest.mark.parametrize("key, value, message", [
    ("seed", -1, "seed=-1 must be in [0, 18446744073709551615]"),  # numpy's SeedSequence would raise later
    ("learning_rate", -1e-3, "learning_rate=-0.001 must be at least 0.0"),  # AdamW would raise
    ("weight_decay", -0.1, "weight_decay=-0.1 must be at least 0.0"),
    ("beta2", 1.0, "beta2=1.0 must be in [0, 1)"),
    ("beta1", -0.5, "beta1=-0.5 must be in [0, 1)"),
    ("grad_clip", -1.0, "grad_clip=-1.0 must be at least 0.0"),  # a negative norm would flip every gradient
    ("min_lr", -1e-4, "min_lr=-0.0001 must be at least 0.0"),
    ("lr_decay_iters", -5, "lr_decay_iters=-5 must be at least 0"),
    ("eval_iters", 0, "eval_iters=0 must be at least 1"),
    ("peak_flops", -1.0, "peak_flops=-1.0 must be at least 0.0"),
    ("tp_mode", "mpi", "tp_mode='mpi': allowed values are 'sim', 'dist'"),
    ("nonfinite", "ignore", "nonfinite='ignore': allowed values are 'stop', 'skip'"),
    ("tp_size", 0, "tp_size=0 must be at least 1"),  # a division by zero in dist's process grid
    ("device", "mps", "device='mps': allowed values are 'auto', 'cpu', 'cuda' and 'cuda:<index>'"),
    ("device", "cuda:x", "device='cuda:x': allowed values are 'auto', 'cpu', 'cuda' and 'cuda:<index>'"),
    ("init_optimizer", True, "init_optimizer=True takes the AdamW state of init_from's checkpoint: "
                             "init_from='scratch' has none (set init_from to a checkpoint, or init_optimizer=False)"),
    ("init_from", "no/such/ckpt.pt", "init_from='no/such/ckpt.pt': allowed values are 'scratch', 'resume', "
                                     "a GPT-2 name (gpt2, gpt2-medium, gpt2-large, gpt2-xl), or an existing ckpt.pt, "
                                     "run directory or transformers directory"),
])
def test_values_that_torch_or_numpy_would_reject_later_are_config_errors(key, value, message):
    config = dict(configurator.train_defaults(), **{key: value})
    with pytest.raises(ConfigError) as error:
        configurator.check_train_config(config)
    assert str(error.value) == message
    configurator.check_train_config(configurator.train_defaults())  # and the defaults pass


@pytest.mark.parametrize("changes, message", [
    (dict(tp_size=1, sync_fraction=0.5), "sync_fraction=0.5 does nothing with tp_size=1 (no sync): set tp_size > 1 or "
                                         "leave sync_fraction at its default (1.0)"),
    (dict(tp_size=1, sync_dtype="int8"), "sync_dtype='int8' does nothing with tp_size=1 (no sync): set tp_size > 1 or "
                                         "leave sync_dtype at its default ('')"),
    (dict(out_dir=__file__), f"out_dir={__file__!r} is a file, not a directory: name the run's directory"),
    pytest.param(dict(backend="nccl"), "backend='nccl' but this torch has no NCCL (a CPU build): use backend='gloo' or 'auto'",
                 marks=pytest.mark.skipif(__import__("torch").distributed.is_nccl_available(), reason="this torch has NCCL")),
])
def test_a_setting_the_run_would_ignore_or_trip_on_is_a_config_error(changes, message):
    with pytest.raises(ConfigError) as error:
        configurator.check_train_config(dict(configurator.train_defaults(), **changes))
    assert str(error.value) == message
    configurator.check_train_config(dict(configurator.train_defaults(), tp_size=2, sync_fraction=0.5, sync_dtype="int8"))


def test_the_mode_choices_are_the_modes_comms_implements():
    import comms
    assert set(configurator.TRAIN_CHOICES["tp_mode"]) == set(comms.MODES)


@pytest.mark.slow
def test_a_negative_seed_is_one_line_from_train_py():
    from bench.harness import run_train
    from conftest import assert_one_line_error
    assert_one_line_error(run_train("--seed=-1", "--max_iters=1"), "error: seed=-1 must be in [0, ")


@pytest.mark.parametrize("flag", ["--help", "-h"])
def test_help_lists_every_key_with_its_default_and_exits_0(flag, capsys):
    defaults = {"out_dir": "out", "max_iters": 600, "loss_rate": 0.0}
    with pytest.raises(SystemExit) as stop:
        configurator.configure(defaults, ["--max_iters=5", flag], script="train.py")
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: python train.py")
    assert "  out_dir = 'out'" in out and "  max_iters = 600" in out and "  loss_rate = 0.0" in out


LOSSY = "only a lossy link reads it (loss_model='bernoulli' or 'gilbert_elliott')"


@pytest.mark.parametrize("model, key, value, reads", [
    ("none", "loss_rate", 0.01, "only loss_model='bernoulli' reads it"),  # a run the user thinks lossy, lossless
    ("none", "transport", "reliable", LOSSY),
    ("none", "sync_rotation", "hadamard", LOSSY),
    ("gilbert_elliott", "loss_rate", 0.05, "only loss_model='bernoulli' reads it"),
    ("bernoulli", "ge_preset", "heavy", "only loss_model='gilbert_elliott' reads it"),
    ("bernoulli", "ge_p", 0.1, "only loss_model='gilbert_elliott' reads it"),
])
def test_a_link_key_the_loss_model_does_not_read_is_a_config_error(model, key, value, reads):
    defaults = configurator.train_defaults()
    config = dict(defaults, loss_model=model, **{key: value})
    with pytest.raises(ConfigError) as error:
        configurator.check_train_config(config)
    assert str(error.value) == (f"{key}={value!r} does nothing with loss_model={model!r}: {reads}; set loss_model "
                                f"or leave {key} at its default ({defaults[key]!r})")


def test_every_link_key_is_read_by_some_loss_model_and_the_ones_read_pass():
    from links import LINK_DEFAULTS, link_from
    checked = {k for keys in configurator.LOSS_MODEL_KEYS.values() for k in keys} | set(configurator.LOSSY_LINK_KEYS)
    assert checked == (set(LINK_DEFAULTS) - {"loss_model", "seed"}) | {"loss_eval"}  # a new link key is checked too
    for model in configurator.LOSS_MODEL_KEYS:  # and the models are the ones links.py builds
        link_from({"loss_model": model, "loss_rate": 0.1})
    defaults = configurator.train_defaults()
    configurator.check_train_config(dict(defaults, loss_model="bernoulli", loss_rate=0.01, packet_bytes=64,
                                         transport="reliable", loss_fwd=False, loss_eval=True))
    configurator.check_train_config(dict(defaults, loss_model="gilbert_elliott", ge_preset="heavy", ge_p=0.1,
                                         lost_fill="rescale", sync_rotation="hadamard"))


def test_the_docs_document_every_config_key_and_no_other():
    """docs/configs.md's "Config keys" table (the README links it): its first column names every global of
    train.py's config (what configurator.train_defaults reads), and none that train.py lacks."""
    import re
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    assert "(docs/configs.md)" in open(os.path.join(root, "README.md")).read()
    text = open(os.path.join(root, "docs", "configs.md")).read()
    section = text.split("\n## Config keys\n", 1)[1].split("\n## ", 1)[0]
    named = {key for row in re.findall(r"^\| ([^|]+) \|", section, flags=re.M) for key in re.findall(r"`(\w+)`", row)}
    keys = set(configurator.train_defaults())
    assert not keys - named, f"docs/configs.md's Config keys lacks {sorted(keys - named)}"
    assert not named - keys, f"docs/configs.md's Config keys names {sorted(named - keys)}, which train.py does not have"


def test_a_quantized_packet_must_hold_its_scale_and_a_value():
    lossy = dict(configurator.train_defaults(), loss_model="bernoulli", loss_rate=0.01, sync_dtype="int8", packet_bytes=4)
    with pytest.raises(ConfigError, match=r"^packet_bytes=4 with sync_dtype='int8': a packet carries a 4-byte scale"):
        configurator.check_train_config(lossy)
    configurator.check_train_config(dict(lossy, packet_bytes=5))
    configurator.check_train_config(dict(lossy, sync_dtype="bfloat16"))  # no scale: 4 bytes hold two values


def test_a_pipeline_key_without_a_pipeline_is_refused():
    """pp_split and pp_schedule do nothing at pp_size=1: one line naming the key, not a silent ignore."""
    defaults = configurator.train_defaults()
    for key, value in (("pp_split", "6"), ("pp_schedule", "gpipe")):
        with pytest.raises(ConfigError, match=rf"^{key}='{value}' does nothing with pp_size=1"):
            configurator.check_train_config(dict(defaults, **{key: value}))
        configurator.check_train_config(dict(defaults, pp_size=2, **{key: value}))


def test_block_types_given_beside_a_schedule_must_be_its_first_pattern():
    """block_schedule decides the pattern from iteration 0: a block_types a config file or --key gave that says
    otherwise would be ignored, so it is refused; the same pattern written another way, or the default, passes."""
    config = dict(configurator.train_defaults(), block_schedule="0:parallel,spd;300:tp", block_types="spd")
    with pytest.raises(ConfigError, match=r"^block_types='spd' is not block_schedule='0:parallel,spd;300:tp''s first pattern"):
        configurator.check_train_config(config, given={"block_types", "block_schedule"})
    configurator.check_train_config(config, given={"block_schedule"})  # train.py's default, not given: no conflict
    configurator.check_train_config(dict(config, block_types="parallel,spd,parallel,spd"), given={"block_types"})
    configurator.check_train_config(dict(config, block_schedule="0:tp;5:spdd"), given={"block_types"})  # train.py names it


def test_muon_is_refused_where_its_checkpoint_could_not_resume():
    """A pipeline's checkpoint rebuilds the whole model's AdamW parameter groups (pipeline.merge): Muon's three
    groups would be saved as two and never load again, so the combination is refused before it trains."""
    with pytest.raises(ConfigError, match=r"^optimizer='muon' with pp_size=2 is not built"):
        configurator.check_train_config(dict(configurator.train_defaults(), optimizer="muon", pp_size=2))
