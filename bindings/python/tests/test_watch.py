"""PolicyWatcher: a broken edit keeps the good policy; a fixed edit takes effect."""

from pathlib import Path

import pytest

import toolwarden

GOOD = """policy "w" version 1
effects none, write
mode m {{ }}
default mode m
tool {name} {{ effect none }}
"""


def offered(watcher: toolwarden.PolicyWatcher) -> list:
    return watcher.policy().offer(toolwarden.Request(mode="m"), ["a", "b"])


def test_broken_edit_keeps_the_good_policy_and_a_fixed_edit_takes_effect(tmp_path: Path) -> None:
    path = tmp_path / "p.warden"
    path.write_text(GOOD.format(name="a"))
    watcher = toolwarden.PolicyWatcher(str(path), watch=False)
    assert watcher.generation == 1
    assert offered(watcher) == ["a"]

    path.write_text("policy \"w\"\neffects none\ntool b { effect nonee }\n")
    with pytest.raises(toolwarden.PolicyError):
        watcher.reload_now()
    assert watcher.generation == 1
    assert watcher.rejected == 1
    assert watcher.last_error is not None and "undefined effect `nonee`" in watcher.last_error
    assert offered(watcher) == ["a"]

    path.write_text(GOOD.format(name="b"))
    assert watcher.reload_now() == 2
    assert watcher.last_error is None
    assert offered(watcher) == ["b"]


def test_a_policy_that_never_loaded_raises(tmp_path: Path) -> None:
    path = tmp_path / "bad.warden"
    path.write_text("tool x { }\n")
    with pytest.raises(toolwarden.PolicyError):
        toolwarden.PolicyWatcher(str(path))
