"""A driver JVM that cannot start says why: :func:`build_session` with a
``driver_log`` raises an error holding what the JVM printed, not only PySpark's
"exited before sending its port number"."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path


def test_a_driver_that_exits_as_it_starts_is_reported_with_what_it_said(tmp_path: Path) -> None:
    # A process of its own: a session is one per process, and the tests' own is there.
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from vehicle_middleware.telemetry_export.session import DriverStartError, build_session

        try:
            build_session(
                "local[1]",
                extra={"spark.driver.extraJavaOptions": f"-javaagent:{sys.argv[2]}"},
                driver_log=Path(sys.argv[1]),
            )
        except DriverStartError as e:
            print(e)
            sys.exit(3)
        """
    )
    log = tmp_path / "driver.log"
    agent = tmp_path / "no-such-agent.jar"  # the JVM refuses to start without it
    result = subprocess.run(
        [sys.executable, "-c", script, str(log), str(agent)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 3, result.stderr[-3000:]
    assert "exited before it answered" in result.stdout
    assert f"Error opening zip file or JAR manifest missing : {agent}" in result.stdout
    assert str(log) in result.stdout
    assert "Error occurred during initialization of VM" in log.read_text()
