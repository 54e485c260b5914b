"""Prompts for the parity and sanity tests: chat-templated questions and raw text continuations."""
from __future__ import annotations

CHAT_QUESTIONS = [
    "What is the capital of France?",
    "Write a haiku about the sea.",
    "Explain photosynthesis in one sentence.",
    "What is 12 times 7?",
    "List three primary colors.",
    "Who wrote Romeo and Juliet?",
    "Give me a tip for learning Python.",
    "Translate 'good morning' into Spanish.",
    "What does a CPU do?",
    "Name a mammal that can fly.",
    "Why is the sky blue?",
    "Suggest a name for a pet goldfish.",
]

RAW_TEXTS = [
    "The quick brown fox",
    "Once upon a time, in a small village,",
    "def fibonacci(n):\n",
    "The three laws of thermodynamics are",
    "import numpy as np\nx = np.",
    "In 1969, the first humans",
    "Water boils at a temperature of",
    "Dear Sir or Madam,\n\nI am writing to",
    "1, 2, 3, 5, 8, 13,",
    "The mitochondria is",
    "SELECT name FROM users WHERE",
    "Paris is the capital of",
]


def chat_messages(question: str) -> list[dict]:
    return [{"role": "user", "content": question}]
