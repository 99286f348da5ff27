"""Text helpers shared by every source kind: one of each (mojibake, language, PII, alarm codes)."""
