//! Printers of the workload kinds (apps, batch, ReplicationController).

use serde_json::{Value, json};

use super::{
    AGE, NAME, Printer, age, col, containers_images, int, items, labels, name, selector, since, text,
    text_or, wide,
};

const CONTAINERS: super::Column = wide("Containers", "Names of each container in the template.");
const IMAGES: super::Column = wide("Images", "Images referenced by each container in the template.");
const SELECTOR: super::Column = wide(
    "Selector",
    "A label query over pods that should match the replica count.",
);

/// `spec.replicas`, which the real server defaults to 1.
fn desired(o: &Value) -> i64 {
    o["spec"]["replicas"].as_i64().unwrap_or(1)
}

/// A label-selector object, or a plain label map (ReplicationController) in the same syntax.
fn any_selector(v: &Value) -> String {
    if v.get("matchLabels").is_some() || v.get("matchExpressions").is_some() {
        selector(v)
    } else {
        match labels(v).as_str() {
            "<none>" => String::new(),
            s => s.to_string(),
        }
    }
}

pub(crate) static DEPLOYMENT: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        col(
            "Up-to-date",
            "string",
            "Total number of non-terminated pods targeted by this deployment that have the desired template spec.",
        ),
        col(
            "Available",
            "string",
            "Total number of available pods (ready for at least minReadySeconds) targeted by this deployment.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |o, now| {
        let status = &o["status"];
        let [containers, images] = containers_images(&o["spec"]["template"]);
        vec![
            name(o),
            json!(format!("{}/{}", int(&status["readyReplicas"]), desired(o))),
            json!(int(&status["updatedReplicas"])),
            json!(int(&status["availableReplicas"])),
            age(o, now),
            containers,
            images,
            json!(selector(&o["spec"]["selector"])),
        ]
    },
};

/// ReplicaSet and ReplicationController.
pub(crate) static REPLICAS: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "Replicas is the number of desired replicas.",
        ),
        col(
            "Current",
            "integer",
            "Replicas is the most recently observed number of replicas.",
        ),
        col(
            "Ready",
            "integer",
            "readyReplicas is the number of pods targeted by this ReplicaSet with a Ready Condition.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |o, now| {
        let status = &o["status"];
        let [containers, images] = containers_images(&o["spec"]["template"]);
        vec![
            name(o),
            json!(desired(o)),
            json!(int(&status["replicas"])),
            json!(int(&status["readyReplicas"])),
            age(o, now),
            containers,
            images,
            json!(any_selector(&o["spec"]["selector"])),
        ]
    },
};

pub(crate) static DAEMON_SET: Printer = Printer {
    columns: &[
        NAME,
        col(
            "Desired",
            "integer",
            "The total number of nodes that should be running the daemon pod.",
        ),
        col(
            "Current",
            "integer",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod.",
        ),
        col(
            "Ready",
            "integer",
            "numberReady is the number of nodes that should be running the daemon pod and have one or more of the daemon pod running with a Ready Condition.",
        ),
        col(
            "Up-to-date",
            "integer",
            "The total number of nodes that are running updated daemon pod",
        ),
        col(
            "Available",
            "integer",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        ),
        col(
            "Node Selector",
            "string",
            "NodeSelector is a selector which must be true for the pod to fit on a node.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |o, now| {
        let status = &o["status"];
        let template = &o["spec"]["template"];
        let [containers, images] = containers_images(template);
        vec![
            name(o),
            json!(int(&status["desiredNumberScheduled"])),
            json!(int(&status["currentNumberScheduled"])),
            json!(int(&status["numberReady"])),
            json!(int(&status["updatedNumberScheduled"])),
            json!(int(&status["numberAvailable"])),
            json!(labels(&template["spec"]["nodeSelector"])),
            age(o, now),
            containers,
            images,
            json!(selector(&o["spec"]["selector"])),
        ]
    },
};

pub(crate) static STATEFUL_SET: Printer = Printer {
    columns: &[
        NAME,
        col("Ready", "string", "Number of the pod with ready state"),
        AGE,
        CONTAINERS,
        IMAGES,
    ],
    cells: |o, now| {
        let [containers, images] = containers_images(&o["spec"]["template"]);
        vec![
            name(o),
            json!(format!("{}/{}", int(&o["status"]["readyReplicas"]), desired(o))),
            age(o, now),
            containers,
            images,
        ]
    },
};

pub(crate) static JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Status", "string", "Status of the job."),
        col("Completions", "string", "The completion status of the job"),
        col("Duration", "string", "Time required to complete the job."),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: job,
};

fn job(o: &Value, now: i64) -> Vec<Value> {
    let (spec, status) = (&o["spec"], &o["status"]);
    let succeeded = int(&status["succeeded"]);
    let completions = match (spec["completions"].as_i64(), int(&spec["parallelism"])) {
        (Some(c), _) => format!("{succeeded}/{c}"),
        (None, p) if p > 1 => format!("{succeeded}/1 of {p}"),
        (None, _) => format!("{succeeded}/1"),
    };
    let has = |ty: &str| {
        items(&status["conditions"])
            .iter()
            .any(|c| c["type"] == ty && c["status"] == "True")
    };
    let state = if has("Complete") {
        "Complete"
    } else if has("Failed") {
        "Failed"
    } else if o["metadata"]["deletionTimestamp"].is_string() {
        "Terminating"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else {
        "Running"
    };
    let start = status["startTime"]
        .as_str()
        .and_then(crate::object::parse_rfc3339);
    let end = status["completionTime"]
        .as_str()
        .and_then(crate::object::parse_rfc3339);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => crate::object::human_age(now - s),
        (Some(s), Some(e)) => crate::object::human_age(e - s),
    };
    let [containers, images] = containers_images(&spec["template"]);
    vec![
        name(o),
        json!(state),
        json!(completions),
        json!(duration),
        age(o, now),
        containers,
        images,
        json!(selector(&spec["selector"])),
    ]
}

pub(crate) static CRON_JOB: Printer = Printer {
    columns: &[
        NAME,
        col("Schedule", "string", "The schedule in Cron format."),
        col("Timezone", "string", "The time zone name for the given schedule."),
        col(
            "Suspend",
            "boolean",
            "This flag tells the controller to suspend subsequent executions.",
        ),
        col(
            "Active",
            "integer",
            "A list of pointers to currently running jobs.",
        ),
        col(
            "Last Schedule",
            "string",
            "Information when was the last time the job was successfully scheduled.",
        ),
        AGE,
        CONTAINERS,
        IMAGES,
        SELECTOR,
    ],
    cells: |o, now| {
        let (spec, status) = (&o["spec"], &o["status"]);
        let job = &spec["jobTemplate"]["spec"];
        let [containers, images] = containers_images(&job["template"]);
        let last = match &status["lastScheduleTime"] {
            t @ Value::String(_) => since(t, now),
            _ => "<none>".to_string(),
        };
        let suspend = match spec["suspend"].as_bool() {
            Some(true) => "True",
            Some(false) => "False",
            None => "<unset>",
        };
        vec![
            name(o),
            json!(text(&spec["schedule"])),
            json!(text_or(&spec["timeZone"], "<none>")),
            json!(suspend),
            json!(items(&status["active"]).len()),
            json!(last),
            age(o, now),
            containers,
            images,
            json!(selector(&job["selector"])),
        ]
    },
};
