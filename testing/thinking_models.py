"""Chat templates that think, and tiny models that carry them.

- `QWEN3_LIKE`: Qwen3's template's thinking parts in ChatML: the model opens its own `<think>`;
  an earlier assistant turn's thought is stripped (its reasoning kept only after the last user
  turn, rewritten with its whitespace trimmed); `enable_thinking=False` closes an empty thought in
  the generation prompt (`<think>\\n\\n</think>\\n\\n`).
- `R1_LIKE`: DeepSeek-R1 distills' (and QwQ's) in ChatML: every assistant turn keeps only what
  follows its `</think>`, and the generation prompt opens the thought (`<think>\\n`).
- `NO_THINK`: `QWEN3_LIKE` with thinking switched off (the empty thought closed in the prompt).

`build_thinking_model(path, template)` is testing/tiny_model.py's random model (`reasoning=True`:
`<think>` and `</think>` tokens of their own, every logit 0, so testing/forcing.py makes it write
given texts) with one of these templates.
"""
from __future__ import annotations

from pathlib import Path

QWEN3_LIKE = (
    "{%- set ns = namespace(last_query=messages|length - 1) -%}"
    "{%- for m in messages[::-1] -%}{%- if m.role == 'user' and ns.last_query == messages|length - 1 -%}"
    "{%- set ns.last_query = messages|length - 1 - loop.index0 -%}{%- endif -%}{%- endfor -%}"
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set content = m.content -%}{%- set reasoning = '' -%}"
    "{%- if '</think>' in content -%}"
    "{%- set reasoning = content.split('</think>')[0].split('<think>')[-1].strip('\\n') -%}"
    "{%- set content = content.split('</think>')[-1].lstrip('\\n') -%}{%- endif -%}"
    "{%- if loop.index0 > ns.last_query and reasoning -%}"
    "{{ '<|im_start|>assistant\\n<think>\\n' + reasoning + '\\n</think>\\n\\n' + content + '<|im_end|>\\n' }}"
    "{%- else -%}{{ '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}{%- endif -%}"
    "{%- else -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n' }}"
    "{%- if enable_thinking is defined and enable_thinking is false -%}{{ '<think>\\n\\n</think>\\n\\n' }}{%- endif -%}"
    "{%- endif -%}"
)

R1_LIKE = (
    "{%- for m in messages -%}"
    "{%- if m.role == 'assistant' -%}"
    "{%- set content = m.content -%}{%- if '</think>' in content -%}{%- set content = content.split('</think>')[-1] -%}"
    "{%- endif -%}{{ '<|im_start|>assistant\\n' + content + '<|im_end|>\\n' }}"
    "{%- else -%}{{ '<|im_start|>' + m.role + '\\n' + m.content + '<|im_end|>\\n' }}{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<|im_start|>assistant\\n<think>\\n' }}{%- endif -%}"
)

NO_THINK = "{%- set enable_thinking = false -%}" + QWEN3_LIKE

TEMPLATES = {"qwen3": QWEN3_LIKE, "r1": R1_LIKE, "no-think": NO_THINK}


def set_template(path: str | Path, template: str) -> Path:
    """Give the checkpoint at `path` this chat template (tokenizer_config.json and chat_template.jinja)."""
    import json

    path = Path(path)
    config_file = path / "tokenizer_config.json"
    config = json.loads(config_file.read_text())
    config["chat_template"] = template
    config_file.write_text(json.dumps(config, indent=2, ensure_ascii=False))
    jinja = path / "chat_template.jinja"
    if jinja.exists():
        jinja.write_text(template)
    return path


def build_thinking_model(path: str | Path, template: str = QWEN3_LIKE) -> Path:
    from testing.tiny_model import build_tiny_model

    return set_template(build_tiny_model(path, reasoning=True), template)
