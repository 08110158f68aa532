"""One generation per sample, as our contracts promise the model: one step, no second turn.

Under the native contract the model is offered the ``bash`` tool, but Inspect
does not run the call (``tool_calls="none"``): running it once here and again
per transport would give the first transport two executions and the model a
tool result it was told it would not see. The scorer replays R on every
requested transport instead (the crossed design).
"""

from __future__ import annotations

from inspect_ai.solver import Generate, Solver, TaskState, solver

from .shell_tool import shell_tool


@solver
def one_step(contract: str, first_transport: str) -> Solver:
    async def solve(state: TaskState, generate: Generate) -> TaskState:
        if contract == "native":
            state.tools = [shell_tool(state.metadata["task_id"], first_transport)]
        return await generate(state, tool_calls="none")

    return solve
