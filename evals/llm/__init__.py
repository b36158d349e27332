"""Language-model policies: one prompt and one tool-call loop (`chat_loop`) over two backends,
an OpenAI-compatible chat-completions endpoint (`openai_chat`) and a local `transformers` model
(`hf_chat`)."""
