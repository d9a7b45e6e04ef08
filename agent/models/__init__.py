"""Where candidates come from: the model backends (transformers with GGUF, an OpenAI-compatible server, replayed completions, none) and KernelLLM's prompt format."""
