"""Import a GGUF checkpoint (llama.cpp's format) as a Hugging Face model directory."""
from engine.gguf_import.errors import GGUFError, UnsupportedGGUFError
from engine.gguf_import.header import validate_gguf
from engine.gguf_import.importer import ImportResult, import_gguf

__all__ = ["GGUFError", "UnsupportedGGUFError", "ImportResult", "import_gguf", "validate_gguf"]
