"""The TRL door's tests run offline."""

from __future__ import annotations

import os

# Nothing in these tests may reach a model hub.
for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
    os.environ[name] = "1"
os.environ["TRL_EXPERIMENTAL_SILENCE"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"
