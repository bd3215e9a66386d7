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
]
# Columns of ``ops`` added after the first ``.tfplace`` files: text where there is some, missing
# elsewhere; a file written before one has none, and loads with it missing on every row (a
# prediction has none of them). A new column of this kind is named here and in OPS_COLUMNS.
OPS_ADDED_LATER = ("xla_op", "input_stage", "source", "source_path")
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
    "ping_pong",
    "host_memory_on_gpu",
    "idle_device",
    "xla_hidden",
    "xla_time",
    "xla_recompile",
    "xla_outside",
    "merged_runs",
    "input_wait",
)
