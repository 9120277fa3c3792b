"""sgltui: a terminal control panel for SGLang LLM servers."""

__version__ = "0.1.0"
