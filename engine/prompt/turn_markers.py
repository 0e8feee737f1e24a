"""Where an answer ends when the model writes a turn marker as text.

A model prompted in a format its vocabulary lacks as special tokens (or one
that spells a marker out) writes `<end_of_turn>` or `<|im_end|>` as plain
text. generate.Stream treats them as stop strings (stop_strings.py): they end the
answer and never reach the printed or stored text.
"""

from .template import ChatTemplate

USER_MARK, ANSWER_MARK, NEXT_MARK = "\x04", "\x05", "\x06"


def turn_markers(template: ChatTemplate) -> list[str]:
    """The template's own text that closes a turn and opens the next (user or assistant)."""
    user = [{"role": "user", "content": USER_MARK}]
    answer = {"role": "assistant", "content": ANSWER_MARK}
    try:
        opening = template.generation_prompt(user)
        turn = template.message_text(user, answer)
        next_turn = template.message_text(user + [answer], {"role": "user", "content": NEXT_MARK})
    except Exception:  # a template that cannot render a probe: no markers to watch for
        return []
    closing = turn.split(ANSWER_MARK, 1)[1].strip() if ANSWER_MARK in turn else ""
    found = [closing, next_turn.split(NEXT_MARK)[0].strip(), opening.strip()]
    return [m for i, m in enumerate(found) if len(m) >= 2 and m not in found[:i]]
