"""Exact token ids of a conversation, built turn by turn, with the env mask the trainer needs.

The whole conversation is never re-tokenized: the prompt is tokenized once through the chat
template, each generated turn is appended as the ids the model produced, and each tool
result is appended as the ids of the template's tool turn around the observation. The ids
the policy conditions on are therefore exactly the ids the trainer scores, and the mask
marks which of them the model generated (1) and which the environment inserted (0).

Text that comes from data is tokenized with ``split_special_tokens=True``: a retrieved
document or a dataset question that contains "<|im_end|>" yields plain-text tokens, never the
control token. Only the chat template's own text (headers, turn ends, the tool block) can
become control tokens.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

_PROBE_ASSISTANT = "ASSISTANT_PROBE"
_PROBE_OBSERVATION = "OBSERVATION_PROBE"
_PROBE_MESSAGE = "MESSAGE_PROBE_{}_"


class ChatTokenizer:
    """Tokenizes prompts, generated turns and tool turns for one chat template."""

    def __init__(self, tokenizer: Any, tools: Sequence[dict], end_of_turn: str = "<|im_end|>"):
        self.tokenizer = tokenizer
        self.tools = list(tools)
        self.end_of_turn = end_of_turn
        self.end_of_turn_id = int(tokenizer.convert_tokens_to_ids(end_of_turn))
        prefix, suffix = self._tool_turn_text()
        self._tool_prefix_ids = self._encode(prefix, split_special=False)
        self._tool_suffix_ids = self._encode(suffix, split_special=False)

    def _encode(self, text: str, split_special: bool) -> list[int]:
        return list(
            self.tokenizer(
                text, add_special_tokens=False, split_special_tokens=split_special
            ).input_ids
        )

    def _tool_turn_text(self) -> tuple[str, str]:
        """The template text between an assistant's end-of-turn token and the next assistant
        header when a tool result comes in between, split around the observation."""
        base = [
            {"role": "user", "content": "Q"},
            {"role": "assistant", "content": _PROBE_ASSISTANT},
        ]
        with_tool = base + [{"role": "tool", "content": _PROBE_OBSERVATION}]
        rendered = self.tokenizer.apply_chat_template(
            with_tool, tools=self.tools or None, tokenize=False, add_generation_prompt=True
        )
        marker = _PROBE_ASSISTANT + self.end_of_turn
        start = rendered.find(marker)
        if start < 0 or _PROBE_OBSERVATION not in rendered:
            raise ValueError(
                "the chat template does not render an assistant turn followed by a tool turn "
                f"ending with {self.end_of_turn!r}; use a template with tool support (qwen2.5)"
            )
        tool_turn = rendered[start + len(marker) :]
        prefix, _, suffix = tool_turn.partition(_PROBE_OBSERVATION)
        return prefix, suffix

    def prompt_ids(self, messages: Sequence[dict[str, Any]]) -> list[int]:
        """[prompt_len] ids of the system and user messages plus the assistant header.

        The template is rendered around a probe in place of each message's content; the
        template's text is tokenized with its special tokens, each content as data (special
        token strings split), so a question cannot inject a turn of its own.
        """
        probes = [_PROBE_MESSAGE.format(i) for i in range(len(messages))]
        probed = [{**m, "content": probe} for m, probe in zip(messages, probes, strict=True)]
        rest = self.tokenizer.apply_chat_template(
            probed, tools=self.tools or None, tokenize=False, add_generation_prompt=True
        )
        ids: list[int] = []
        for message, probe in zip(messages, probes, strict=True):
            template, found, rest = rest.partition(probe)
            if not found:
                raise ValueError(
                    f"the chat template does not render the content of a {message['role']} "
                    "message as it is; use a template that does (qwen2.5)"
                )
            ids += self._encode(template, split_special=False)
            ids += self._encode(message["content"], split_special=True)
        return ids + self._encode(rest, split_special=False)

    def text_ids(self, text: str) -> list[int]:
        """Ids of a turn's text when the policy returned text only (chat-level backends)."""
        return self._encode(text, split_special=True)

    def tool_turn_ids(self, observation: str) -> list[int]:
        """[n] ids the environment inserts after an assistant turn: the tool turn and the
        next assistant header."""
        return (
            self._tool_prefix_ids
            + self._encode(observation, split_special=True)
            + self._tool_suffix_ids
        )


@dataclass
class TokenTrace:
    """An episode's token ids so far. ``env_mask[i]`` is 1 for ids the model generated, 0
    for ids the environment inserted; ``logprobs[i]`` is the sampling log-probability of a
    generated id (0.0 for inserted ones)."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    has_logprobs: bool = True
    """False once any generated turn came without logprobs."""

    @property
    def context_ids(self) -> list[int]:
        return self.prompt_ids + self.completion_ids

    @property
    def length(self) -> int:
        return len(self.prompt_ids) + len(self.completion_ids)

    def add_generated(self, ids: Sequence[int], logprobs: Sequence[float] | None) -> None:
        self.completion_ids.extend(int(i) for i in ids)
        self.env_mask.extend([1] * len(ids))
        if logprobs is None or len(logprobs) != len(ids):
            self.has_logprobs = False
            self.logprobs.extend([0.0] * len(ids))
        else:
            self.logprobs.extend(float(x) for x in logprobs)

    def add_inserted(self, ids: Sequence[int]) -> None:
        self.completion_ids.extend(int(i) for i in ids)
        self.env_mask.extend([0] * len(ids))
        self.logprobs.extend([0.0] * len(ids))
