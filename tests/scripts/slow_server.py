"""`python -m app serve` whose agent has one extra tool that blocks: lets tests hold a run open.

Usage: slow_server.py HOLD_FILE [SERVE ARGS…]. A message containing "slow step" makes the model call
`slow_step`, which holds while HOLD_FILE exists (two minutes at most), then answers; one containing
"markdown sample" is answered with MARKDOWN_SAMPLE (lists, code, raw HTML, a script link, a remote
image, Chinese);
any other message goes to the offline model.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool

import app.service.context
from app.__main__ import main
from app.models.offline import OfflineChatModel

hold_file = Path(sys.argv[1])
HOLD_AT_MOST = 120.0
# What a real model's answer may hold: Markdown the page must render, and HTML it must not run.
MARKDOWN_SAMPLE = """Here is **the plan**:

- first step
- second step

```python
print("hi")
```

<script>window.pwned = "script"</script>
<img src="x" onerror="window.pwned = 'img'">
[a link](javascript:window.pwned='link')
![a tracking pixel](http://127.0.0.9:9/pixel.png)

北京今天晴，气温二十五度。"""


@tool
def slow_step(label: str) -> str:
    """Take a long time (test helper)."""
    deadline = time.monotonic() + HOLD_AT_MOST
    while hold_file.exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    return f"finished {label}"


class SlowStepModel(OfflineChatModel):
    def plan(self, messages: Sequence[BaseMessage]) -> AIMessage:
        start = max(i for i, m in enumerate(messages) if isinstance(m, HumanMessage))
        if "markdown sample" in str(messages[start].content):
            return AIMessage(content=MARKDOWN_SAMPLE, id=f"ai-markdown-{len(messages)}")
        if "slow step" not in str(messages[start].content):
            return super().plan(messages)
        if any(isinstance(m, ToolMessage) for m in messages[start:]):
            return AIMessage(content="all done", id=f"ai-slow-done-{len(messages)}")
        call = {"name": "slow_step", "args": {"label": "A"}, "id": f"slow-{len(messages)}"}
        return AIMessage(content="", tool_calls=[call], id=f"ai-slow-{len(messages)}")


def slow_context(settings, model=None, **options):  # type: ignore[no-untyped-def]
    context = real_make_context(settings, SlowStepModel(), **options)
    return dataclasses.replace(context, tools=[*context.tools, slow_step])


real_make_context = app.service.context.make_context
app.service.context.make_context = slow_context
sys.argv = ["app", "serve", *sys.argv[2:]]
main()
