//! Integration tests live in tests/integration/.
