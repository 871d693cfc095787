"""The delivery engine: in every Celery worker process, an asyncio loop on a
thread of its own claims due events up to the room it has, sends them with
many requests in flight, fairly across bots, and records the outcomes in
batches (loop.py); lanes.py shares its requests between bots, stats.py says
how it keeps up, process.py runs it inside a worker process, wakeups.py
wakes it when an event falls due now.

Its database steps: claims.py claims due events under a lease (leases.py),
delivery.py records what each attempt came to (verdicts.py) and when a
failed one is tried again (backoff.py). Its requests: webhook_client.py
sends them, signed as Standard Webhooks (signing.py)."""
