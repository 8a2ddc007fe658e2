"""Running a method over questions (resumable, LM calls batched) and summarising its traces."""
