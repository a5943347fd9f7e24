// Generated after `napi build` by scripts/dts.js (scripts/option-table.js) from index.d.ts;
// do not edit. What each entry point and options object takes, for `args.rs`.
#![allow(dead_code)]

use super::args::{Field, Interface, Param, Ty};

/// `checkPythonKernelAvailability`
pub static CHECK_PYTHON_KERNEL_AVAILABILITY: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&RESOLVE_PYTHON_OPTIONS), optional: true },
];

/// `clampLine`
pub static CLAMP_LINE: &[Param] = &[
    Param { name: "line", ty: Ty::String, optional: false },
    Param { name: "maxColumns", ty: Ty::Number, optional: true },
];

/// `collapsedPreview`
pub static COLLAPSED_PREVIEW: &[Param] = &[
    Param { name: "text", ty: Ty::String, optional: false },
    Param { name: "options", ty: Ty::Interface(&COLLAPSED_PREVIEW_OPTIONS), optional: true },
];

/// `defaultHiddenPaths`
pub static DEFAULT_HIDDEN_PATHS: &[Param] = &[
];

/// `evalBackends`
pub static EVAL_BACKENDS: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&EVAL_BACKENDS_OPTIONS), optional: true },
];

/// `filterEnv`
pub static FILTER_ENV: &[Param] = &[
    Param { name: "env", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Undefined])), optional: false },
    Param { name: "options", ty: Ty::Interface(&FILTER_ENV_OPTIONS), optional: true },
];

/// `fitImages`
pub static FIT_IMAGES: &[Param] = &[
    Param { name: "images", ty: Ty::Array(&Ty::Interface(&IMAGE_TO_FIT)), optional: false },
    Param { name: "options", ty: Ty::Interface(&FIT_IMAGES_OPTIONS), optional: true },
];

/// `pythonCandidates`
pub static PYTHON_CANDIDATES: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&RESOLVE_PYTHON_OPTIONS), optional: true },
];

/// `readArtifact`
pub static READ_ARTIFACT: &[Param] = &[
    Param { name: "uri", ty: Ty::String, optional: false },
    Param { name: "options", ty: Ty::Interface(&READ_ARTIFACT_OPTIONS), optional: false },
];

/// `renderBundle`
pub static RENDER_BUNDLE: &[Param] = &[
    Param { name: "bundle", ty: Ty::Record(&Ty::Any), optional: false },
    Param { name: "options", ty: Ty::Interface(&RENDER_BUNDLE_OPTIONS), optional: true },
];

/// `resolvePython`
pub static RESOLVE_PYTHON: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&RESOLVE_PYTHON_OPTIONS), optional: true },
];

/// `streamingPreview`
pub static STREAMING_PREVIEW: &[Param] = &[
    Param { name: "text", ty: Ty::Union(&[Ty::String, Ty::Array(&Ty::String)]), optional: false },
    Param { name: "options", ty: Ty::Interface(&STREAMING_PREVIEW_OPTIONS), optional: true },
];

/// `Kernel.start`
pub static KERNEL_START: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&KERNEL_START_OPTIONS), optional: true },
];

/// `Kernel#execute`
pub static KERNEL_EXECUTE: &[Param] = &[
    Param { name: "code", ty: Ty::String, optional: false },
    Param { name: "options", ty: Ty::Interface(&EXECUTE_OPTIONS), optional: true },
];

/// `Kernel#evaluate`
pub static KERNEL_EVALUATE: &[Param] = &[
    Param { name: "cells", ty: Ty::Array(&Ty::Interface(&EVAL_CELL)), optional: false },
    Param { name: "options", ty: Ty::Interface(&EVALUATE_OPTIONS), optional: true },
];

/// `Kernel#interrupt`
pub static KERNEL_INTERRUPT: &[Param] = &[
];

/// `Kernel#shutdown`
pub static KERNEL_SHUTDOWN: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&SHUTDOWN_OPTIONS), optional: true },
];

/// `Kernel#isComplete`
pub static KERNEL_IS_COMPLETE: &[Param] = &[
    Param { name: "code", ty: Ty::String, optional: false },
];

/// `new KernelPool`
pub static NEW_KERNEL_POOL: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&POOL_OPTIONS), optional: true },
];

/// `KernelPool#execute`
pub static KERNEL_POOL_EXECUTE: &[Param] = &[
    Param { name: "request", ty: Ty::Interface(&EVAL_REQUEST), optional: false },
];

/// `KernelPool#disposeOwner`
pub static KERNEL_POOL_DISPOSE_OWNER: &[Param] = &[
    Param { name: "ownerId", ty: Ty::String, optional: false },
    Param { name: "options", ty: Ty::Interface(&DISPOSE_OPTIONS), optional: true },
];

/// `KernelPool#disposeAll`
pub static KERNEL_POOL_DISPOSE_ALL: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&DISPOSE_OPTIONS), optional: true },
];

/// `KernelPool#reopen`
pub static KERNEL_POOL_REOPEN: &[Param] = &[
];

/// `new KvStore`
pub static NEW_KV_STORE: &[Param] = &[
    Param { name: "artifactsDir", ty: Ty::String, optional: false },
    Param { name: "sessionId", ty: Ty::String, optional: false },
    Param { name: "options", ty: Ty::Interface(&KV_STORE_OPTIONS), optional: true },
];

/// `KvStore#get`
pub static KV_STORE_GET: &[Param] = &[
    Param { name: "key", ty: Ty::String, optional: false },
];

/// `KvStore#set`
pub static KV_STORE_SET: &[Param] = &[
    Param { name: "key", ty: Ty::String, optional: false },
    Param { name: "value", ty: Ty::Any, optional: false },
];

/// `KvStore#delete`
pub static KV_STORE_DELETE: &[Param] = &[
    Param { name: "key", ty: Ty::String, optional: false },
];

/// `KvStore#list`
pub static KV_STORE_LIST: &[Param] = &[
];

/// `new OutputBuilder`
pub static NEW_OUTPUT_BUILDER: &[Param] = &[
    Param { name: "options", ty: Ty::Interface(&OUTPUT_BUILDER_OPTIONS), optional: true },
];

/// `OutputBuilder#push`
pub static OUTPUT_BUILDER_PUSH: &[Param] = &[
    Param { name: "text", ty: Ty::String, optional: false },
];

/// `OutputBuilder#pushEvent`
pub static OUTPUT_BUILDER_PUSH_EVENT: &[Param] = &[
    Param { name: "event", ty: Ty::Object, optional: false },
];

/// `OutputBuilder#endCell`
pub static OUTPUT_BUILDER_END_CELL: &[Param] = &[
];

/// `OutputBuilder#finish`
pub static OUTPUT_BUILDER_FINISH: &[Param] = &[
    Param { name: "outcome", ty: Ty::Interface(&RUN_OUTCOME), optional: true },
];

pub static BACKEND_SETTINGS: Interface = Interface {
    name: "BackendSettings",
    fields: &[
        Field { key: "py", ty: Ty::Boolean, optional: true },
        Field { key: "js", ty: Ty::Boolean, optional: true },
    ],
};

pub static COLLAPSED_PREVIEW_OPTIONS: Interface = Interface {
    name: "CollapsedPreviewOptions",
    fields: &[
        Field { key: "mode", ty: Ty::String, optional: true },
    ],
};

pub static DISPOSE_OPTIONS: Interface = Interface {
    name: "DisposeOptions",
    fields: &[
        Field { key: "budgetMs", ty: Ty::Number, optional: true },
    ],
};

pub static EVAL_BACKENDS_OPTIONS: Interface = Interface {
    name: "EvalBackendsOptions",
    fields: &[
        Field { key: "settings", ty: Ty::Interface(&BACKEND_SETTINGS), optional: true },
        Field { key: "env", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Undefined])), optional: true },
        Field { key: "envPrefix", ty: Ty::String, optional: true },
        Field { key: "flagStyle", ty: Ty::String, optional: true },
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "interpreter", ty: Ty::String, optional: true },
    ],
};

pub static EVAL_CELL: Interface = Interface {
    name: "EvalCell",
    fields: &[
        Field { key: "code", ty: Ty::String, optional: false },
        Field { key: "title", ty: Ty::String, optional: true },
        Field { key: "timeout", ty: Ty::Number, optional: true },
        Field { key: "reset", ty: Ty::Boolean, optional: true },
    ],
};

pub static EVAL_REQUEST: Interface = Interface {
    name: "EvalRequest",
    fields: &[
        Field { key: "cells", ty: Ty::Array(&Ty::Interface(&EVAL_CELL)), optional: false },
        Field { key: "mode", ty: Ty::String, optional: true },
        Field { key: "sessionId", ty: Ty::String, optional: true },
        Field { key: "sessionFile", ty: Ty::String, optional: true },
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "interpreter", ty: Ty::String, optional: true },
        Field { key: "launcher", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "ownerId", ty: Ty::String, optional: true },
        Field { key: "timeoutSeconds", ty: Ty::Number, optional: true },
        Field { key: "timeoutMs", ty: Ty::Number, optional: true },
        Field { key: "deadlineMs", ty: Ty::Number, optional: true },
        Field { key: "env", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Null])), optional: true },
        Field { key: "artifactsDir", ty: Ty::String, optional: true },
        Field { key: "reset", ty: Ty::Boolean, optional: true },
        Field { key: "signal", ty: Ty::Object, optional: true },
        Field { key: "onEvent", ty: Ty::Function, optional: true },
        Field { key: "onOutput", ty: Ty::Function, optional: true },
        Field { key: "outputFlushMs", ty: Ty::Number, optional: true },
        Field { key: "artifactId", ty: Ty::String, optional: true },
        Field { key: "includeFigureText", ty: Ty::Boolean, optional: true },
        Field { key: "requestId", ty: Ty::String, optional: true },
        Field { key: "artifactPath", ty: Ty::String, optional: true },
        Field { key: "uriRoots", ty: Ty::Record(&Ty::String), optional: true },
    ],
};

pub static EVALUATE_OPTIONS: Interface = Interface {
    name: "EvaluateOptions",
    fields: &[
        Field { key: "timeoutMs", ty: Ty::Number, optional: true },
        Field { key: "signal", ty: Ty::Object, optional: true },
        Field { key: "onEvent", ty: Ty::Function, optional: true },
        Field { key: "artifactsDir", ty: Ty::String, optional: true },
        Field { key: "onOutput", ty: Ty::Function, optional: true },
        Field { key: "outputFlushMs", ty: Ty::Number, optional: true },
        Field { key: "artifactId", ty: Ty::String, optional: true },
        Field { key: "includeFigureText", ty: Ty::Boolean, optional: true },
        Field { key: "env", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Null])), optional: true },
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "requestId", ty: Ty::String, optional: true },
        Field { key: "artifactPath", ty: Ty::String, optional: true },
        Field { key: "uriRoots", ty: Ty::Record(&Ty::String), optional: true },
    ],
};

pub static EXECUTE_OPTIONS: Interface = Interface {
    name: "ExecuteOptions",
    fields: &[
        Field { key: "timeoutMs", ty: Ty::Number, optional: true },
        Field { key: "signal", ty: Ty::Object, optional: true },
        Field { key: "onEvent", ty: Ty::Function, optional: true },
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "env", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Null])), optional: true },
        Field { key: "maxCapturedBytes", ty: Ty::Number, optional: true },
        Field { key: "silent", ty: Ty::Boolean, optional: true },
        Field { key: "requestId", ty: Ty::String, optional: true },
        Field { key: "storeHistory", ty: Ty::Boolean, optional: true },
        Field { key: "uriRoots", ty: Ty::Record(&Ty::String), optional: true },
    ],
};

pub static FILTER_ENV_OPTIONS: Interface = Interface {
    name: "FilterEnvOptions",
    fields: &[
        Field { key: "envPrefix", ty: Ty::String, optional: true },
    ],
};

pub static FIT_IMAGES_OPTIONS: Interface = Interface {
    name: "FitImagesOptions",
    fields: &[
        Field { key: "maxEdge", ty: Ty::Number, optional: true },
        Field { key: "maxBytes", ty: Ty::Number, optional: true },
        Field { key: "maxTotalBytes", ty: Ty::Number, optional: true },
        Field { key: "keepOriginalsIn", ty: Ty::String, optional: true },
    ],
};

pub static IMAGE_TO_FIT: Interface = Interface {
    name: "ImageToFit",
    fields: &[
        Field { key: "mime", ty: Ty::String, optional: false },
        Field { key: "data", ty: Ty::String, optional: false },
    ],
};

pub static KERNEL_OPTIONS: Interface = Interface {
    name: "KernelOptions",
    fields: &[
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "baseEnv", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Undefined])), optional: true },
        Field { key: "env", ty: Ty::Record(&Ty::String), optional: true },
        Field { key: "interpreter", ty: Ty::String, optional: true },
        Field { key: "envPrefix", ty: Ty::String, optional: true },
        Field { key: "statusMime", ty: Ty::String, optional: true },
        Field { key: "includeFigureText", ty: Ty::Boolean, optional: true },
        Field { key: "startupTimeoutMs", ty: Ty::Number, optional: true },
        Field { key: "memoryLimitBytes", ty: Ty::Number, optional: true },
        Field { key: "maxProcesses", ty: Ty::Number, optional: true },
        Field { key: "onCall", ty: Ty::Function, optional: true },
        Field { key: "artifactsDir", ty: Ty::String, optional: true },
        Field { key: "sessionId", ty: Ty::String, optional: true },
        Field { key: "sandbox", ty: Ty::Union(&[Ty::String, Ty::Interface(&SANDBOX_OPTIONS)]), optional: true },
        Field { key: "launcher", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "launcherShell", ty: Ty::Boolean, optional: true },
        Field { key: "linkTimeoutMs", ty: Ty::Number, optional: true },
        Field { key: "reattach", ty: Ty::Interface(&REATTACH_OPTIONS), optional: true },
        Field { key: "preload", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "zygote", ty: Ty::Boolean, optional: true },
        Field { key: "defaultAgent", ty: Ty::String, optional: true },
        Field { key: "uriRoots", ty: Ty::Record(&Ty::String), optional: true },
    ],
};

pub static KERNEL_START_OPTIONS: Interface = Interface {
    name: "KernelStartOptions",
    fields: &[
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "baseEnv", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Undefined])), optional: true },
        Field { key: "env", ty: Ty::Record(&Ty::String), optional: true },
        Field { key: "interpreter", ty: Ty::String, optional: true },
        Field { key: "envPrefix", ty: Ty::String, optional: true },
        Field { key: "statusMime", ty: Ty::String, optional: true },
        Field { key: "includeFigureText", ty: Ty::Boolean, optional: true },
        Field { key: "startupTimeoutMs", ty: Ty::Number, optional: true },
        Field { key: "memoryLimitBytes", ty: Ty::Number, optional: true },
        Field { key: "maxProcesses", ty: Ty::Number, optional: true },
        Field { key: "onCall", ty: Ty::Function, optional: true },
        Field { key: "artifactsDir", ty: Ty::String, optional: true },
        Field { key: "sessionId", ty: Ty::String, optional: true },
        Field { key: "sandbox", ty: Ty::Union(&[Ty::String, Ty::Interface(&SANDBOX_OPTIONS)]), optional: true },
        Field { key: "launcher", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "launcherShell", ty: Ty::Boolean, optional: true },
        Field { key: "linkTimeoutMs", ty: Ty::Number, optional: true },
        Field { key: "reattach", ty: Ty::Interface(&REATTACH_OPTIONS), optional: true },
        Field { key: "preload", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "zygote", ty: Ty::Boolean, optional: true },
        Field { key: "defaultAgent", ty: Ty::String, optional: true },
        Field { key: "uriRoots", ty: Ty::Record(&Ty::String), optional: true },
        Field { key: "signal", ty: Ty::Object, optional: true },
        Field { key: "deadlineMs", ty: Ty::Number, optional: true },
    ],
};

pub static KV_STORE_OPTIONS: Interface = Interface {
    name: "KvStoreOptions",
    fields: &[
        Field { key: "envPrefix", ty: Ty::String, optional: true },
    ],
};

pub static NETWORK_ALLOW_LIST: Interface = Interface {
    name: "NetworkAllowList",
    fields: &[
        Field { key: "allow", ty: Ty::Array(&Ty::String), optional: false },
    ],
};

pub static OUTPUT_BUILDER_OPTIONS: Interface = Interface {
    name: "OutputBuilderOptions",
    fields: &[
        Field { key: "artifactsDir", ty: Ty::String, optional: true },
        Field { key: "artifactId", ty: Ty::String, optional: true },
        Field { key: "artifactPath", ty: Ty::String, optional: true },
        Field { key: "lineBytes", ty: Ty::Number, optional: true },
        Field { key: "headBytes", ty: Ty::Number, optional: true },
        Field { key: "tailBytes", ty: Ty::Number, optional: true },
        Field { key: "includeFigureText", ty: Ty::Boolean, optional: true },
        Field { key: "statusMime", ty: Ty::String, optional: true },
    ],
};

pub static POOL_OPTIONS: Interface = Interface {
    name: "PoolOptions",
    fields: &[
        Field { key: "mode", ty: Ty::String, optional: true },
        Field { key: "maxSessions", ty: Ty::Union(&[Ty::Number, Ty::String]), optional: true },
        Field { key: "maxConcurrent", ty: Ty::Union(&[Ty::Number, Ty::String]), optional: true },
        Field { key: "acquireTimeoutMs", ty: Ty::Number, optional: true },
        Field { key: "idleTimeoutMs", ty: Ty::Union(&[Ty::Number, Ty::String]), optional: true },
        Field { key: "heartbeatIntervalMs", ty: Ty::Number, optional: true },
        Field { key: "heartbeatTimeoutMs", ty: Ty::Number, optional: true },
        Field { key: "shutdownGraceMs", ty: Ty::Number, optional: true },
        Field { key: "artifactsDir", ty: Ty::String, optional: true },
        Field { key: "prewarm", ty: Ty::Number, optional: true },
        Field { key: "preload", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "kernel", ty: Ty::Interface(&KERNEL_OPTIONS), optional: true },
        Field { key: "launchers", ty: Ty::Array(&Ty::Array(&Ty::String)), optional: true },
        Field { key: "placement", ty: Ty::String, optional: true },
        Field { key: "launcherFor", ty: Ty::Function, optional: true },
    ],
};

pub static READ_ARTIFACT_OPTIONS: Interface = Interface {
    name: "ReadArtifactOptions",
    fields: &[
        Field { key: "artifactsDir", ty: Ty::String, optional: false },
    ],
};

pub static REATTACH_OPTIONS: Interface = Interface {
    name: "ReattachOptions",
    fields: &[
        Field { key: "graceMs", ty: Ty::Number, optional: false },
    ],
};

pub static RENDER_BUNDLE_OPTIONS: Interface = Interface {
    name: "RenderBundleOptions",
    fields: &[
        Field { key: "statusMime", ty: Ty::String, optional: true },
    ],
};

pub static RESOLVE_PYTHON_OPTIONS: Interface = Interface {
    name: "ResolvePythonOptions",
    fields: &[
        Field { key: "cwd", ty: Ty::String, optional: true },
        Field { key: "interpreter", ty: Ty::String, optional: true },
        Field { key: "baseEnv", ty: Ty::Record(&Ty::Union(&[Ty::String, Ty::Undefined])), optional: true },
        Field { key: "envPrefix", ty: Ty::String, optional: true },
    ],
};

pub static RUN_OUTCOME: Interface = Interface {
    name: "RunOutcome",
    fields: &[
        Field { key: "exitCode", ty: Ty::Number, optional: true },
        Field { key: "timedOut", ty: Ty::Boolean, optional: true },
        Field { key: "timeoutMs", ty: Ty::Number, optional: true },
        Field { key: "cancelled", ty: Ty::Boolean, optional: true },
        Field { key: "killed", ty: Ty::Boolean, optional: true },
        Field { key: "stdinRequested", ty: Ty::Boolean, optional: true },
    ],
};

pub static SANDBOX_OPTIONS: Interface = Interface {
    name: "SandboxOptions",
    fields: &[
        Field { key: "network", ty: Ty::Union(&[Ty::Boolean, Ty::Interface(&NETWORK_ALLOW_LIST)]), optional: true },
        Field { key: "writable", ty: Ty::Union(&[Ty::Array(&Ty::String), Ty::String]), optional: true },
        Field { key: "hidden", ty: Ty::Array(&Ty::String), optional: true },
        Field { key: "installs", ty: Ty::String, optional: true },
    ],
};

pub static SHUTDOWN_OPTIONS: Interface = Interface {
    name: "ShutdownOptions",
    fields: &[
        Field { key: "graceMs", ty: Ty::Number, optional: true },
    ],
};

pub static STREAMING_PREVIEW_OPTIONS: Interface = Interface {
    name: "StreamingPreviewOptions",
    fields: &[
        Field { key: "maxLines", ty: Ty::Number, optional: true },
    ],
};
