"""The fixed parameters of bench/driver.py's run: the targets, how long and
how often each scenario runs (full and --quick), and the sizes every proxy
is configured with."""

import os

from procs import ROOT

BENCH = os.path.join(ROOT, "bench")
CONF = os.path.join(BENCH, "conf")

TARGETS = ["direct", "nginx", "haproxy", "weir"]
PROXIES = ["nginx", "haproxy", "weir"]
LABEL = {"direct": "upstream direct", "nginx": "nginx", "haproxy": "HAProxy", "weir": "weir"}

# Durations and sizes. A full run must stay under 15 minutes on 2 cores,
# --quick under 3 (build excluded when nothing changed).
FULL = dict(
    reps=3,
    d_h1=8,            # scenario 1, seconds per run
    d_h2=8,            # scenario 2
    d_tls=6,           # scenario 3
    tls_batch=100,     # scenario 3: connections opened at once by one h2load
    big=1 << 30,       # scenario 4: bytes
    big_reps=3,
    idle=10000,        # scenario 5: idle connections (capped by the fd limit)
    idle_reps=1,
    d_attack=8,        # scenario 6: seconds before, and seconds during the attack
    attack_reps=2,
    d_admission=8,     # scenario 7
    quiet_wait_run=20,     # at most this long before one run for other load to go away
    quiet_wait_total=120,  # and at most this long in the whole run
)
QUICK = dict(
    reps=1, d_h1=3, d_h2=3, d_tls=2, tls_batch=100, big=256 << 20, big_reps=1,
    idle=1000, idle_reps=1, d_attack=3, attack_reps=1, d_admission=3,
    quiet_wait_run=5, quiet_wait_total=20,
)

H1_CONNS = 64          # wrk connections (scenarios 1, 6)
H2_CONNS, H2_STREAMS = 8, 8
CAP = 1024             # connection cap of every proxy (scenarios 1-4, 6, 7)
ATTACK = 3 * CAP       # slowloris connections
ATTACK_RATE = 1024     # slowloris connections opened per second
GATE = 32              # scenario 7: concurrent requests admitted
SLOW_DELAY = 0.05      # scenario 7: seconds the slow upstream takes per request
ADMISSION_CONNS = 4 * GATE
