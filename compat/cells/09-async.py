# async code as agents write it: top-level await, gather, tasks, asyncio.run.
# compat: ci

# %% import
import asyncio

# %% top-level-await
await asyncio.sleep(0.01)
"slept"

# %% gather
async def fetch(i):
    await asyncio.sleep(0.01)
    return {"id": i, "ok": True}

results = await asyncio.gather(*(fetch(i) for i in range(3)))
results

# %% create-task
task = asyncio.create_task(fetch(99))
await task

# %% async-for
async def ticks(n):
    for i in range(n):
        await asyncio.sleep(0)
        yield i

[t async for t in ticks(4)]

# %% asyncio-run
asyncio.run(fetch(1))

# %% wait-for-timeout
try:
    await asyncio.wait_for(asyncio.sleep(1), timeout=0.01)
except asyncio.TimeoutError:
    print("timed out as expected")
