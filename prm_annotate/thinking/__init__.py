"""Thinking: a reasoning model's `<think>…</think>` before its answer, read in one place.

- `tags`: the one reading of the tags: a completion as a thought and an answer, by where the chat
  template leaves the thought; the answers of an answer that thinks again; where the tags stand;
  what a rollout writes before a thought's prefix.
- `split`: an engine's output split into its reasoning and its answer before anything reads it
  (vLLM's reasoning parsers, or the plain split), and whether a chat template thinks.
- `probe`: whether a stage's model thinks and where its thought starts (`--reasoning`, the `auto`
  probe over HTTP), a result's completion as a trace, the thought's tokens.
- `grading`: a thinking completion graded on its answer only, and only when it has one.

The engines and the segmenters read the tags (`tags`, `split`), so those two stand below them and
import nothing of the package; `probe` and `grading` stand above the engines and the grader
(tests/test_layout.py). Importing `tags` runs this file first, so it imports nothing.
"""
