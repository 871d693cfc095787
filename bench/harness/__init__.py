"""The benchmarks' shared harness. Each module holds one concern:

- `project`: a throwaway database and data folder with the project migrated
  and seeded (its rate limits out of reach), the PostgreSQL/Redis settings, a
  Celery queue of the run's own;
- `servers`: the project's processes (gunicorn, uvicorn, the Procfile's web
  line, its worker and beat) and the webhook receiver, as context managers;
- `load`: load generators: wrk with a counting Lua script, an open-loop
  client on raw sockets, timings, in-process WSGI calls and SQL statements;
- `machine`: machine facts, waiting for a quiet machine, CPU accounting from
  /proc, phases measured again while background load spoiled them;
- `report`: percentiles and the lines every benchmark prints (latency
  spreads, the background-load warning, the correctness verdict);
- `api`: the requests and rows of the project's own API that several
  benchmarks send and count (create event, chat users, conversations and
  messages);
- `live`: the live stream's listeners, their latencies, and the raw Redis
  baseline;
- `event_rows`: bots and events written straight into the tables (COPY), at
  once or arriving all the time, the reading of their delivery attempts and
  of what the receiver got, and the webhook client alone;
- `documents`: documents to index, an upload done the real way, and the
  passages indexed checked against the document.

Nothing here asserts on time: the scripts print figures and ratios measured in
the same run. Every resource made here is undone by the context managers, even
when a step fails or the run is interrupted (SIGINT, SIGTERM).
"""
