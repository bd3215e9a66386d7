"""The columns of a trace's frames (``ops``, ``events``, ``transfers``, ``findings``) and the
values a finding's ``kind`` and ``severity`` take: one definition for the tracers, the readers
that check a file's frames, and the analyses."""

OPS_COLUMNS = [
    "op",
    "type",
    "device",
    "requested_device",
    "how",
    "reason",
    "start_us",
    "duration_us",
    "runs",
    "output_bytes",
    "function",
    "kernels",
    "gpu_kernel",
    # the HLO instruction (fusion) an op of an XLA cluster went into; <NA> outside XLA
    "xla_op",
    # the tf.data stage (dataset op) whose function ran the op; <NA> for the traced calls' ops
    "input_stage",
    # where the user's code made the op (tfadapter.origins): "train.py:42 in train_step" (the
    # file relative to the working directory, else its name), "" for an op TensorFlow's runtime
    # added (_Send, _Recv, _Arg...), <NA> where the trace did not record it
    "source",
    # the same frame's full path and line ("/home/me/train.py:42"), for an editor
    "source_path",
    # TensorFlow's allocator records (graph mode's step_stats, FULL_TRACE): the bytes the op's
    # allocations took over its runs (its AllocatorMemoryUsed.total_bytes, summed), its own
    # high-water mark (peak_bytes, the largest of a run), and the allocator's name as TF gives
    # it ("cpu", "mklcpu", "GPU_0_bfc", "cuda_host_bfc"; several: largest first). 0, 0 and
    # <NA> for an op that ran and allocated nothing; <NA> where the trace has no allocator
    # records: ops without a record of their own (_Send, _Recv), Chrome traces, predictions,
    # and TF2 profiles (not read: the profiler's MemoryAllocation events come only from some
    # allocators, oneDNN's mklcpu for large tensors on a CPU, none with oneDNN off)
    "allocated_bytes",
    "peak_bytes",
    "allocator",
]
# Columns of ``ops`` added after the first ``.tfplace`` files (those from xla_op on): text, or
# bytes, where there is some, missing elsewhere; a file written before one has none, and loads
# with it missing on every row (a prediction has none of them). A new one goes at the end.
OPS_ADDED_LATER = tuple(OPS_COLUMNS[OPS_COLUMNS.index("xla_op") :])  # xla_op and after
# Those of OPS_ADDED_LATER that hold whole numbers (Int64, missing where not recorded).
OPS_ADDED_LATER_BYTES = ("allocated_bytes", "peak_bytes")
EVENTS_COLUMNS = ["op", "device", "lane", "thread", "start_us", "duration_us", "label"]
# cross_task: source and destination are on different tasks (job/replica/task) of a cluster
# trace.xla: one row per executed HLO instruction of an XLA cluster
XLA_COLUMNS = [
    "cluster",
    "instruction",
    "kind",
    "device",
    "start_us",
    "duration_us",
    "tf_ops",
    "source",
]
# trace.memory: one row per change of a device's live bytes, from TensorFlow's allocator records
# (each allocation and deallocation an op's tracking allocator saw in a traced step): time_us on
# ops.start_us's axis, bytes signed (+ allocated, - freed), live_bytes after the change (what
# the step's ops allocated on that device and allocator and had not freed yet), op: who
# allocated it. Empty where the trace has no allocator records. kind: "temporary" for those
# (the step's own allocations), "persistent" for what the device holds from before the step to
# after it (variables, constants: sources/persistent.py), one row per tensor at the step's
# start, live_bytes their own running sum (never added to the step's). variable: the name of
# the variable a persistent row holds, as TensorFlow names it (tf.Variable.name less its ":0",
# Keras 3's Variable.path; graph mode's VarHandleOp/VariableV2 is the variable: its op name),
# missing for the step's own rows and for constants (object dtype, None).
MEMORY_COLUMNS = ["device", "allocator", "time_us", "bytes", "live_bytes", "op", "kind", "variable"]
MEMORY_KINDS = ("temporary", "persistent")
TRANSFERS_COLUMNS = ["tensor", "src_device", "dst_device", "bytes", "cross_task"]
# predicted: a prediction about a machine with a GPU the trace did not run on (issue 24)
# fix: the placement change that cures it, as data (_analyses/findings/fixes.py), or None
FINDINGS_COLUMNS = ["kind", "severity", "ops", "message", "evidence", "predicted", "fix"]
SEVERITIES = ("high", "medium", "info")
FINDING_KINDS = (
    "cpu_fallback",
    "soft_move",
    "costly_transfer",
    "cross_task_transfer",
    "unbalanced_ps",
    "overridden_request",
    "ping_pong",
    "host_memory_on_gpu",
    "idle_device",
    "xla_hidden",
    "xla_time",
    "xla_recompile",
    "xla_outside",
    "merged_runs",
    "input_wait",
    "gpu_memory",
    "memory_peak",
    "pinned_host_memory",
    "input_memory",
    "replicated_variables",
)
