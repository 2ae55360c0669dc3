//! Cross-process scenarios live in `tests/`.
