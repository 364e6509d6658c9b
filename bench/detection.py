"""perfgate's detection quality, side by side with the peers' rules, in one run.

    python bench/detection.py

1. PR gate (bench/detection_gate.py): false alarms of whole gates on A/A data, power at 5%
   and 10% regressions with 1, 3 and 5 repeats against conbench-, asv-, Bencher-style rules
   and a fixed threshold at a matched false-alarm rate, and paired A/B against history
   gating when job-level noise dominates.
2. History analysis (bench/detection_history.py): precision, recall and F1 of change-point
   detection against Apache Otava (PyPI ``apache-otava`` 0.8.0, default parameters), a
   fixed-percentage threshold and the no-change predictor, and the runtime on one
   1,000-point series. apache-otava is not a perfgate dependency: it pins numpy 2.2 and
   scipy < 1.17 and pulls cloud clients. It was measured with ``pip install apache-otava``
   followed by ``pip install numpy==2.4.6 scipy==1.17.1`` (Otava runs with them); without
   it the Otava row says NOT AVAILABLE.

Nothing here is asserted; the numbers, with their targets, are for a person to read.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import detection_gate  # noqa: E402
import detection_history  # noqa: E402


def main() -> int:
    def out(line: str) -> None:
        print(line, flush=True)

    started = time.perf_counter()
    out("perfgate detection benchmark: python bench/detection.py")
    out("")
    detection_gate.run(out)
    out("")
    detection_history.run(out)
    out("")
    out(f"(whole detection benchmark took {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
