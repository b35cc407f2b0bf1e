"""The framework adapters' per-request cost when one process serves many users.

    python bench/adapters.py                       # InMemoryStore, every installed framework (about 1 min)
    python bench/adapters.py --s3                  # and on moto's S3, in process, as well (about 2.5 min)
    python bench/adapters.py --only langchain,strands --requests 20 --rounds 3

For each adapter (LangChain's ``S3ClaudeMemoryMiddleware``, pydantic-ai's ``S3Memory``,
Strands' ``S3MemoryStore`` in a ``MemoryManager`` and its ``memory_tool`` alone, deepagents'
``deep_agent_backend``), three ways to answer a request:

- (a) the framework's floor: one agent at module scope whose scripted model calls a tool that
  does nothing, then answers; no memory (deepagents: its own ``ls /memories/`` on its default
  backend, the run's empty state, so the same tools and the same call without s3memory);
- (b) one agent built once at module scope (as in a warm Lambda container or a server
  worker), each request for another user, named through the framework's per-run mechanism:
  LangChain's ``context=``, pydantic-ai's ``deps=``, Strands' ``invocation_state`` (the
  store or tool among the agent's hooks, ``agent.messages`` cleared per request),
  deepagents' ``context=``;
- (c) an agent and its adapter (``user_id=``) built per request.

A request: a scripted model (no network, no API key) makes one memory call (``view
/memories``; deepagents' ``ls /memories/``), then answers. The model is the same object in
every scenario of a framework and keeps no state (each call reads the conversation), so one
agent can serve every request. 50 users each have one file, written before the rounds with
the key cache every scenario shares, so the key cache is warm (no key request per request,
as in a warm container); each answer is checked to list its own user's file and no other.
The store, its S3 client and the key cache are shared by every scenario: in (c) only the
agent and the adapter are built per request. In (b) and (c) the next request's user is never
the last one's.

The scenarios run interleaved, round by round (each round every scenario runs ``--requests``
requests, in an order rotated each round), after one unmeasured warm-up pass. Per request:
wall time (``time.perf_counter``) and CPU (``time.process_time``: every thread of this
process, so moto's S3 work, in process, is in it with ``--s3``). Printed: the median over
every request of every round, and the range of the rounds' medians, which shows the noise.
``run.py`` does not call this script (the frameworks' imports take seconds); run it on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime
import gc
import importlib.metadata
import itertools
import json
import os
import platform
import re
import statistics
import sys
import time
import warnings
from collections.abc import AsyncGenerator, Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from measure import BUCKET, MASTER_KEY, REGION

USERS = 50
PROMPT = "what do I drink?"
USER_NAME = re.compile(r"user-\d\d")

Request = Callable[[str], str]  # a user id in, the memory call's result (its text) out


def user_ids() -> list[str]:
    return [f"user-{n:02d}" for n in range(USERS)]


def file_of(user: str) -> str:
    return f"/memories/{user}.md"


class Adapter:
    """One framework: what a request through it is, in each scenario."""

    name = ""
    adapter = ""  # what is measured, as the framework's users name it
    versions: tuple[str, ...] = ()  # distributions whose versions are printed
    per_run = ""  # how (b) names the user
    floor_note = ""

    def floor(self) -> Request:
        raise NotImplementedError

    def shared(self, options: dict[str, Any]) -> Request:
        raise NotImplementedError

    def per_request(self, options: dict[str, Any]) -> Request:
        raise NotImplementedError

    def close(self) -> None:
        """Release what the framework left behind in this process (after the last request)."""


# -- LangChain and deepagents (LangGraph) -----------------------------------------------------


def _chat_model(tool: str, arguments: dict[str, Any]) -> Any:
    """A LangChain chat model that calls ``tool`` once, then answers: the conversation tells
    it which turn it is at, so one model (one agent) serves any number of runs."""
    from langchain_core.language_models import BaseChatModel
    from langchain_core.messages import AIMessage, ToolMessage
    from langchain_core.outputs import ChatGeneration, ChatResult

    class Scripted(BaseChatModel):
        def bind_tools(self, tools: Any, *, tool_choice: Any = None, **kwargs: Any) -> Any:
            return self

        @property
        def _llm_type(self) -> str:
            return "scripted"

        def _generate(self, messages: Any, stop: Any = None, run_manager: Any = None, **kwargs: Any) -> Any:
            if any(isinstance(message, ToolMessage) for message in messages):
                message = AIMessage(content="You drink tea.")
            else:
                message = AIMessage(content="", tool_calls=[{"name": tool, "args": arguments, "id": "c1"}])
            return ChatResult(generations=[ChatGeneration(message=message)])

    return Scripted()


def _langchain_noop() -> Any:
    from langchain_core.tools import tool

    @tool
    def noop(command: str, path: str) -> str:
        """Does nothing."""
        return "ok"

    return noop


def _tool_text(out: Mapping[str, Any]) -> str:
    from langchain_core.messages import ToolMessage

    (result,) = [message for message in out["messages"] if isinstance(message, ToolMessage)]
    if result.status != "success":
        raise RuntimeError(f"the memory call failed: {result.text}")
    return str(result.text)


def _question() -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": PROMPT}]}


class LangChain(Adapter):
    name = "langchain"
    adapter = "S3ClaudeMemoryMiddleware"
    versions = ("langchain", "langgraph", "langchain-core")
    per_run = "`context=` per request"

    def __init__(self) -> None:
        from langchain.agents import create_agent

        from s3memory.integrations.langchain import S3ClaudeMemoryMiddleware

        self.create_agent, self.middleware = create_agent, S3ClaudeMemoryMiddleware
        self.view = {"command": "view", "path": "/memories"}
        self.model = _chat_model("memory", self.view)

    def floor(self) -> Request:
        agent = self.create_agent(_chat_model("noop", self.view), tools=[_langchain_noop()])
        return lambda user: _tool_text(agent.invoke(_question()))

    def shared(self, options: dict[str, Any]) -> Request:
        from dataclasses import make_dataclass

        context = make_dataclass("Context", [("user_id", str)])
        agent = self.create_agent(self.model, tools=[], middleware=[self.middleware(**options)], context_schema=context)
        return lambda user: _tool_text(agent.invoke(_question(), context=context(user_id=user)))

    def per_request(self, options: dict[str, Any]) -> Request:
        def request(user: str) -> str:
            agent = self.create_agent(self.model, tools=[], middleware=[self.middleware(user_id=user, **options)])
            return _tool_text(agent.invoke(_question()))

        return request


class DeepAgents(Adapter):
    name = "deepagents"
    adapter = "deep_agent_backend"
    versions = ("deepagents", "langgraph", "langchain-core")
    per_run = "`context=` per request"
    floor_note = "deepagents' own `ls /memories/`, on its default backend: the run's state, empty"

    def __init__(self) -> None:
        from deepagents import create_deep_agent

        from s3memory.integrations.deepagents import deep_agent_backend

        self.create_deep_agent, self.backend = create_deep_agent, deep_agent_backend
        self.model = _chat_model("ls", {"path": "/memories/"})

    def floor(self) -> Request:
        agent = self.create_deep_agent(model=self.model)  # the same tools and call, no s3memory
        return lambda user: _tool_text(agent.invoke(_question()))

    def shared(self, options: dict[str, Any]) -> Request:
        agent = self.create_deep_agent(model=self.model, backend=self.backend(**options))
        return lambda user: _tool_text(agent.invoke(_question(), context={"user_id": user}))

    def per_request(self, options: dict[str, Any]) -> Request:
        def request(user: str) -> str:
            agent = self.create_deep_agent(model=self.model, backend=self.backend(user_id=user, **options))
            return _tool_text(agent.invoke(_question()))

        return request


# -- pydantic-ai ------------------------------------------------------------------------------


class PydanticAI(Adapter):
    name = "pydantic-ai"
    adapter = "S3Memory"
    versions = ("pydantic-ai-slim",)
    per_run = "`deps=` per request"

    def __init__(self) -> None:
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import FunctionModel

        from s3memory.integrations.pydantic_ai import S3Memory

        self.agent_class, self.capability, self.returned = Agent, S3Memory, ToolReturnPart

        def script(tool: str) -> Any:
            def respond(messages: list[Any], info: Any) -> Any:
                if any(isinstance(part, ToolReturnPart) for part in messages[-1].parts):
                    return ModelResponse(parts=[TextPart("You drink tea.")])
                return ModelResponse(parts=[ToolCallPart(tool, {"command": "view", "path": "/memories"}, "c1")])

            return FunctionModel(respond)

        self.model, self.noop_model = script("memory"), script("noop")

    def _text(self, result: Any) -> str:
        parts = [p for m in result.all_messages() for p in m.parts if isinstance(p, self.returned)]
        (part,) = parts
        return str(part.content)

    def floor(self) -> Request:
        def noop(command: str, path: str) -> str:
            """Does nothing."""
            return "ok"

        agent = self.agent_class(self.noop_model, tools=[noop])
        return lambda user: self._text(agent.run_sync(PROMPT))

    def shared(self, options: dict[str, Any]) -> Request:
        agent = self.agent_class(self.model, capabilities=[self.capability(**options)])
        return lambda user: self._text(agent.run_sync(PROMPT, deps={"user_id": user}))

    def per_request(self, options: dict[str, Any]) -> Request:
        def request(user: str) -> str:
            agent = self.agent_class(self.model, capabilities=[self.capability(user_id=user, **options)])
            return self._text(agent.run_sync(PROMPT))

        return request

    def close(self) -> None:
        """``Agent.run_sync`` makes a new event loop the thread's current one and leaves it open;
        a later ``asyncio.run`` would drop it unclosed (a ResourceWarning in whoever runs next)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # no loop running
            try:
                loop = asyncio.get_event_loop_policy().get_event_loop()
            except RuntimeError:  # none set
                return
        if not loop.is_running():
            loop.close()
            asyncio.set_event_loop(None)


# -- Strands ----------------------------------------------------------------------------------


def _strands_model(tool: str) -> Any:
    """A Strands model that calls ``tool`` once (``view /memories``), then answers; stateless."""
    from strands.models import Model

    class Scripted(Model):
        def update_config(self, **model_config: Any) -> None:
            pass

        def get_config(self) -> Any:
            return {}

        async def structured_output(self, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            raise NotImplementedError
            yield

        async def stream(self, messages: Any, *args: Any, **kwargs: Any) -> AsyncGenerator[Any, None]:
            answered = any("toolResult" in block for block in messages[-1]["content"])
            yield {"messageStart": {"role": "assistant"}}
            if answered:
                yield {"contentBlockStart": {"start": {}}}
                yield {"contentBlockDelta": {"delta": {"text": "You drink tea."}}}
            else:
                arguments = json.dumps({"command": "view", "path": "/memories"})
                yield {"contentBlockStart": {"start": {"toolUse": {"name": tool, "toolUseId": "c1"}}}}
                yield {"contentBlockDelta": {"delta": {"toolUse": {"input": arguments}}}}
            yield {"contentBlockStop": {}}
            yield {"messageStop": {"stopReason": "end_turn" if answered else "tool_use"}}

    return Scripted()


def _strands_text(agent: Any) -> str:
    results = [block["toolResult"] for m in agent.messages for block in m["content"] if "toolResult" in block]
    (result,) = results
    text = "".join(part.get("text", "") for part in result["content"])
    if result["status"] != "success":
        raise RuntimeError(f"the memory call failed: {text}")
    return text


class Strands(Adapter):
    """``S3MemoryStore`` in a ``MemoryManager`` (its ``memory`` tool, and the manager's search
    tool and injection: a search of the user's memory before each model call)."""

    name = "strands"
    adapter = "S3MemoryStore in a MemoryManager (injection on)"
    versions = ("strands-agents",)
    per_run = '`invocation_state={"user_id": ...}`, the store among the hooks'

    def __init__(self) -> None:
        from strands import Agent, tool
        from strands.memory import MemoryManager

        from s3memory.integrations.strands import S3MemoryStore, memory_tool

        self.agent_class, self.manager, self.store, self.tool = Agent, MemoryManager, S3MemoryStore, memory_tool
        self.model = _strands_model("memory")

        @tool
        def noop(command: str, path: str) -> str:
            """Does nothing."""
            return "ok"

        self.noop = noop

    def _agent(self, **options: Any) -> Any:
        return self.agent_class(model=self.model, callback_handler=None, **options)

    def _with(self, memory: Any, hooks: bool) -> dict[str, Any]:
        return {"memory_manager": self.manager(stores=[memory]), "hooks": [memory] if hooks else []}

    def _adapter(self, **options: Any) -> Any:
        return self.store(**options)

    def floor(self) -> Request:
        agent = self.agent_class(model=_strands_model("noop"), tools=[self.noop], callback_handler=None)

        def request(user: str) -> str:
            agent.messages.clear()
            agent(PROMPT)
            return _strands_text(agent)

        return request

    def shared(self, options: dict[str, Any]) -> Request:
        agent = self._agent(**self._with(self._adapter(**options), hooks=True))

        def request(user: str) -> str:
            agent.messages.clear()  # one agent, a new conversation per request
            agent(PROMPT, invocation_state={"user_id": user})
            return _strands_text(agent)

        return request

    def per_request(self, options: dict[str, Any]) -> Request:
        def request(user: str) -> str:
            agent = self._agent(**self._with(self._adapter(user_id=user, **options), hooks=False))
            agent(PROMPT)
            return _strands_text(agent)

        return request


class StrandsTool(Strands):
    """``memory_tool`` alone: the agent's ``memory`` tool, no manager."""

    name = "strands-tool"
    adapter = "memory_tool (no MemoryManager)"
    per_run = '`invocation_state={"user_id": ...}`, the tool among the hooks'

    def _with(self, memory: Any, hooks: bool) -> dict[str, Any]:
        return {"tools": [memory], "hooks": [memory] if hooks else []}

    def _adapter(self, **options: Any) -> Any:
        return self.tool(**options)


ADAPTERS: dict[str, type[Adapter]] = {
    "langchain": LangChain,
    "pydantic-ai": PydanticAI,
    "strands": Strands,
    "strands-tool": StrandsTool,
    "deepagents": DeepAgents,
}


# -- the backends -----------------------------------------------------------------------------


@contextmanager
def backends(s3: bool) -> Iterator[dict[str, dict[str, Any]]]:
    """The adapters' options (without ``user_id``) per backend, 50 users each with one file
    already written: an ``InMemoryStore`` with a master key, and with ``s3`` moto's S3 (in
    process) with a KMS key. One key cache each, warm once the files are written."""
    from s3memory import InMemoryStore, KeyCache, open_memory

    found = {"InMemoryStore": {"store": InMemoryStore(), "master_key": MASTER_KEY, "key_cache": KeyCache()}}
    with ExitStack() as stack:
        if s3:
            from moto import mock_aws

            for name, value in {
                "AWS_ACCESS_KEY_ID": "bench",
                "AWS_SECRET_ACCESS_KEY": "bench",
                "AWS_DEFAULT_REGION": REGION,
            }.items():
                os.environ.setdefault(name, value)
            stack.enter_context(mock_aws())
            import boto3

            s3_client = boto3.client("s3", region_name=REGION)
            s3_client.create_bucket(Bucket=BUCKET)
            kms = boto3.client("kms", region_name=REGION)
            key = kms.create_key(Description="bench")["KeyMetadata"]["Arn"]
            found["S3 (moto)"] = {
                "bucket": BUCKET,
                "s3_client": s3_client,
                "kms_key_id": key,
                "kms_client": kms,
                "key_cache": KeyCache(),
            }
        for options in found.values():
            for user in user_ids():
                memory = open_memory(user_id=user, **options)
                memory.create(file_of(user), f"{user} drinks tea\n")
                memory.close()
        yield found


# -- measuring --------------------------------------------------------------------------------


@dataclass
class Scenario:
    label: str  # "floor", "shared", "per request"
    backend: str | None
    request: Request
    wall: list[list[float]] = field(default_factory=list)  # per round, per request
    cpu: list[list[float]] = field(default_factory=list)


def _check(scenario: Scenario, user: str, text: str) -> None:
    """The answer lists the user's file and no other user's (the floor's, no user's)."""
    if scenario.backend is None:
        ok = not USER_NAME.search(text)
    else:
        ok = file_of(user) in text and set(USER_NAME.findall(text)) == {user}
    if not ok:
        raise RuntimeError(f"{scenario.label} on {scenario.backend}: unexpected answer for {user}: {text[:300]!r}")


def _play(scenario: Scenario, users: Iterator[str], requests: int, timed: bool) -> None:
    walls, cpus = [], []
    gc.collect()  # the last scenario's garbage is not this one's to collect
    for _ in range(requests):
        user = next(users)
        wall, cpu = time.perf_counter(), time.process_time()
        text = scenario.request(user)
        cpu, wall = time.process_time() - cpu, time.perf_counter() - wall
        _check(scenario, user, text)
        walls.append(wall)
        cpus.append(cpu)
    if timed:
        scenario.wall.append(walls)
        scenario.cpu.append(cpus)


def measure_adapter(adapter: Adapter, stores: dict[str, dict[str, Any]], requests: int, rounds: int) -> list[Scenario]:
    """Build the floor's and each backend's module-scope agents once, warm every scenario up
    (the shared agents with a request for each user), then ``rounds`` interleaved rounds."""
    scenarios = [Scenario("floor", None, adapter.floor())]
    for backend, options in stores.items():
        scenarios.append(Scenario("shared", backend, adapter.shared(options)))
        scenarios.append(Scenario("per request", backend, adapter.per_request(options)))
    users = itertools.cycle(user_ids())
    for scenario in scenarios:
        _play(scenario, users, USERS if scenario.label == "shared" else 5, timed=False)
    for number in range(rounds):
        shift = number % len(scenarios)
        for scenario in scenarios[shift:] + scenarios[:shift]:
            _play(scenario, users, requests, timed=True)
    return scenarios


def _median(values: list[float]) -> float:
    return statistics.median(values)


def summary(scenario: Scenario) -> dict[str, float]:
    """Seconds: the median over every request (wall, CPU), and the least and most of the
    rounds' wall medians."""
    rounds = [_median(walls) for walls in scenario.wall]
    return {
        "wall": _median([w for walls in scenario.wall for w in walls]),
        "cpu": _median([c for cpus in scenario.cpu for c in cpus]),
        "round_min": min(rounds),
        "round_max": max(rounds),
    }


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def measure(
    only: list[str] | None = None, requests: int = 40, rounds: int = 5, s3: bool = False, progress: bool = True
) -> dict[str, Any]:
    """Every adapter in ``only`` (all by default): per scenario and backend, the figures of
    :func:`summary`; an adapter whose framework does not import is ``skipped`` with why."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    results: dict[str, Any] = {
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": f"{platform.system()} {platform.machine()}",
            "date": datetime.date.today().isoformat(),
            "load": load,
        },
        "requests": requests,
        "rounds": rounds,
        "s3memory": _version("s3memory"),
        "adapters": {},
    }
    started = time.perf_counter()
    with backends(s3) as stores:
        results["backends"] = list(stores)
        for name in only or list(ADAPTERS):
            kind = ADAPTERS[name]
            entry: dict[str, Any] = {
                "adapter": kind.adapter,
                "per_run": kind.per_run,
                "floor_note": kind.floor_note,
                "versions": {d: _version(d) for d in kind.versions},
            }
            results["adapters"][name] = entry
            try:
                adapter = kind()
            except ImportError as error:
                entry["skipped"] = f"not installed ({error})"
                continue
            if progress:
                print(f"{name} ...", file=sys.stderr, flush=True)
            try:
                scenarios = measure_adapter(adapter, stores, requests, rounds)
            finally:
                adapter.close()
            entry["floor"] = summary(scenarios[0])
            entry["backends"] = {
                backend: {s.label: summary(s) for s in scenarios if s.backend == backend} for backend in stores
            }
    results["seconds"] = time.perf_counter() - started
    return results


# -- printing ---------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def _cells(figures: dict[str, float]) -> str:
    rounds = f"{figures['round_min'] * 1000:.1f}-{figures['round_max'] * 1000:.1f} ms"
    return f"{_ms(figures['wall'])} | {_ms(figures['cpu'])} | {rounds}"


def render(results: dict[str, Any]) -> str:
    machine = results["machine"]
    lines = [
        f"Framework adapters, per request, {machine['date']} on {machine['cpus']} CPUs ({machine['platform']}), "
        f"Python {machine['python']}, s3memory {results['s3memory']}, load average {machine['load']:.1f} at the start",
        f"{results['requests']} requests a scenario a round, {results['rounds']} rounds interleaved; {USERS} users "
        "with one file each, warm key cache; a scripted model makes one memory call "
        "(view /memories; deepagents: ls /memories/), then answers",
        f"(a) floor: no-op tool, no memory; (b) one agent at module scope, a user per run; "
        f"(c) an agent and its adapter (user_id=) per request. Backends: {', '.join(results['backends'])}",
    ]
    rows = []
    for name, entry in results["adapters"].items():
        versions = ", ".join(f"{d} {v}" for d, v in entry["versions"].items())
        lines += ["", f"{name}: {entry['adapter']} ({versions})"]
        if "skipped" in entry:
            lines.append(f"skipped: {entry['skipped']}")
            continue
        floor = "(a) floor" + (f" ({entry['floor_note']})" if entry["floor_note"] else "")
        lines += [
            "| per request | backend | wall median | CPU median | wall, rounds' medians |",
            "| --- | --- | ---: | ---: | ---: |",
            f"| {floor} | none | {_cells(entry['floor'])} |",
        ]
        for backend, figures in entry["backends"].items():
            shared, built = figures["shared"], figures["per request"]
            lines += [
                f"| (b) one agent, {entry['per_run']} | {backend} | {_cells(shared)} |",
                f"| (c) agent + adapter per request | {backend} | {_cells(built)} |",
            ]
            rows.append((name, backend, entry["floor"], shared, built))
        for backend, figures in entry["backends"].items():
            shared, built = figures["shared"], figures["per request"]
            lines.append(
                f"(c)/(b) on {backend}: {built['wall'] / shared['wall']:.2f} wall, "
                f"{built['cpu'] / shared['cpu']:.2f} CPU; (b) - (a): {_ms(shared['wall'] - entry['floor']['wall'])}"
            )
    if rows:
        lines += [
            "",
            "Summary (wall medians):",
            "| framework | backend | (a) floor | (b) one agent | (c) agent per request | (c)/(b) |",
            "| --- | --- | ---: | ---: | ---: | ---: |",
        ]
        for name, backend, floor, shared, built in rows:
            lines.append(
                f"| {name} | {backend} | {_ms(floor['wall'])} | {_ms(shared['wall'])} | {_ms(built['wall'])} "
                f"| {built['wall'] / shared['wall']:.2f} |"
            )
    lines += ["", f"total: {results['seconds']:.0f} s"]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=40, help="requests a scenario a round (default 40)")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (default 5)")
    parser.add_argument("--s3", action="store_true", help="on moto's S3 (in process) as well as the InMemoryStore")
    parser.add_argument("--only", default="", help=f"comma-separated, of: {','.join(ADAPTERS)} (default all)")
    parser.add_argument("--json", type=Path, help="also write the figures (seconds) to this file")
    args = parser.parse_args(argv)
    only = [name.strip() for name in args.only.split(",") if name.strip()]
    unknown = sorted(set(only) - set(ADAPTERS))
    if unknown:
        parser.error(f"unknown adapters: {', '.join(unknown)} (known: {', '.join(ADAPTERS)})")
    if args.requests < 1 or args.rounds < 1:
        parser.error("--requests and --rounds must be at least 1")
    results = measure(only or None, args.requests, args.rounds, args.s3)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    print(render(results))
    return 0


if __name__ == "__main__":
    sys.exit(main())
