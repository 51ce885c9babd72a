"""A run's budget cap, shared by every chunk on every worker (Redis).

`Run.budget_usd` caps what a run spends over all its launches. One Redis hash per run holds
what its requests have spent and what the requests in flight have reserved, in micro-dollars
(integers: no float drift across thousands of increments). Before a request is sent, its
estimated price (the prompt estimated by `estimate_prompt_tokens`, the reply at its whole
`max_tokens` allowance: apps.runs.engine.llm) is reserved in one Lua step; when the request ends its
reservation goes and its real cost is added. While spent + reserved + this request would pass
the budget the request waits for those in flight to end (their real cost is usually below
their reservation); once spent + this request alone would pass it, the run stops like a cancel
(engine `ChunkRunner.over_budget` → `Run.stop_for_budget`): finished results stay, resume with
a larger budget does the rest. So the run's cost never passes the budget, and where it stops
does not depend on how many requests were in flight.

Each launch starts the hash at `Run.cost` (what the database knows the run spent), so a
reservation left by a killed worker lasts only until the next resume. Because the reply is
reserved at its allowance, a run stops a little before the cap rather than ever after it.
"""

from decimal import Decimal, InvalidOperation
from typing import Any

from apps.runs.engine.limits import KEY_PREFIX
from apps.runs.engine.tuning import KEY_TTL

MICRO = 1_000_000

# What `reserve` answers.
RESERVED, FULL, WAIT = 1, 0, -1

# KEYS spend; ARGV amount, budget (micro-USD). 1: reserved; 0: it would pass the budget even
# with nothing in flight (stop); -1: not now, but requests in flight may leave room (wait).
_RESERVE = """
local spent = tonumber(redis.call('HGET', KEYS[1], 'spent') or '0')
local reserved = tonumber(redis.call('HGET', KEYS[1], 'reserved') or '0')
local amount = tonumber(ARGV[1])
local budget = tonumber(ARGV[2])
if spent + amount > budget then return 0 end
if spent + reserved + amount > budget then return -1 end
redis.call('HINCRBY', KEYS[1], 'reserved', amount)
return 1
"""


def spend_key(run_id: int) -> str:
    return f"{KEY_PREFIX}:run:{run_id}:spend"


def micro(usd: float) -> int:
    return round(usd * MICRO)


def start_spend(pipe: Any, run_id: int, spent_usd: float) -> None:
    """A launch starts from what the run has spent (on a sync Redis pipeline)."""
    pipe.delete(spend_key(run_id))
    pipe.hset(spend_key(run_id), mapping={"spent": micro(spent_usd), "reserved": 0})
    pipe.expire(spend_key(run_id), KEY_TTL)


class RunBudget:
    """One chunk's view of its run's budget (the `Budget` that `LLM.chat` reserves from)."""

    def __init__(self, client: Any, run_id: int, budget_usd: float, spent_usd: float) -> None:
        self.client = client
        self.key = spend_key(run_id)
        self.budget = micro(budget_usd)
        self.spent_at_start = micro(spent_usd)
        self._reserve = client.register_script(_RESERVE)

    async def join(self) -> None:
        """Make sure the hash exists (it expires with the launch's keys)."""
        await self.client.hsetnx(self.key, "spent", self.spent_at_start)
        await self.client.expire(self.key, KEY_TTL)

    async def reserve(self, amount: float) -> int:
        """RESERVED, FULL (stop) or WAIT (ask again when requests in flight have ended)."""
        return int(await self._reserve(keys=[self.key], args=[micro(amount), self.budget]))

    async def settle(self, reserved: float, spent: float) -> None:
        pipe = self.client.pipeline(transaction=True)
        pipe.hincrby(self.key, "reserved", -micro(reserved))
        pipe.hincrby(self.key, "spent", micro(spent))
        await pipe.execute()

    async def spent(self) -> float:
        return int(await self.client.hget(self.key, "spent") or 0) / MICRO


def check_budget(budget: Any, endpoint: Any) -> Decimal | None:
    """The budget to store, or ValueError in plain words: it must be positive, and the
    endpoint's model must have a price (without one every request costs "$0", and no cap
    could ever stop it)."""
    if budget is None or budget == "":
        return None
    try:
        value = Decimal(str(budget))
    except InvalidOperation:
        raise ValueError(
            f"The budget must be an amount in USD, like 5 or 0.50, not {budget!r}."
        ) from None
    if not value.is_finite() or value <= 0:
        raise ValueError("The budget must be more than $0.")
    if endpoint is None:
        raise ValueError("A budget caps what an endpoint's requests cost; this run has none.")
    if not endpoint.has_price:
        raise ValueError(f"A budget needs a price: {endpoint.unknown_cost_hint()}.")
    return value.quantize(Decimal("0.0001"))
