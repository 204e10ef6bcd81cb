"""The CLI makes the cyclic collector rare during start-up and restores it once a command
starts reading sessions (forensics.cli.main / started)."""

import gc
import subprocess
import sys

from forensics import cli


def test_started_restores_the_thresholds_main_raised():
    before = gc.get_threshold()
    cli._thresholds_before_start = before
    gc.set_threshold(cli.START_UP_COLLECTIONS_EVERY, *before[1:])
    try:
        cli.started()
        assert gc.get_threshold() == before
        assert cli._thresholds_before_start is None
        cli.started()  # a second call (build_config, then load_sessions) changes nothing
        assert gc.get_threshold() == before
    finally:
        gc.set_threshold(*before)
        gc.unfreeze()


def test_a_scan_runs_with_the_collector_at_its_usual_rate():
    probe = (
        "import gc, sys\n"
        "from forensics import cli, engine\n"
        "seen = []\n"
        "real = engine.scan_session\n"
        "def spy(*a, **k):\n"
        "    seen.append(gc.get_threshold()[0])\n"
        "    return real(*a, **k)\n"
        "engine.scan_session = spy\n"
        "from forensics.resources import sample_session\n"
        "sys.argv = ['forensics', 'scan', str(sample_session())]\n"
        "try:\n"
        "    cli.main()\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('thresholds', seen, file=sys.stderr)\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    line = [x for x in out.stderr.splitlines() if x.startswith("thresholds")]
    assert line, out.stderr
    seen = eval(line[0].split(" ", 1)[1])
    assert seen and cli.START_UP_COLLECTIONS_EVERY not in seen
