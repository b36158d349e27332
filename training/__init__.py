"""Training with TRL: datasets, oracle transcripts for SFT, the SFT and GRPO entry points.

The package needs the `train` extra; without it, importing it is one clear error.
"""

from env_core.extras import require_extra

require_extra("train", "training", __name__)
