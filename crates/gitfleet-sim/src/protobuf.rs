//! Kubernetes' protobuf request bodies, decoded to the JSON the rest of the simulator reads.
//!
//! kubectl's typed generators (`kubectl create namespace|configmap|secret|deployment|…`) send
//! `Content-Type: application/vnd.kubernetes.protobuf`, which a real API server accepts for
//! every built-in kind. The body is the magic `k8s\0` followed by a `runtime.Unknown` message
//! (`typeMeta` = 1, `raw` = 2, `contentEncoding` = 3, `contentType` = 4) whose `raw` is the
//! object in the kind's own message (k8s.io/api `generated.proto`).
//!
//! Protobuf carries field numbers, not names, so decoding needs each message's schema. The
//! table below covers the kinds kubectl's generators create, DeleteOptions and Eviction (kubectl
//! drain), SelfSubjectAccessReview (`auth can-i`), TokenRequest (`create token`), and the
//! messages they use; a kind outside it, or a non-empty field it does not know, is a 415
//! naming them (never silently dropped). Go's protobuf encoding writes every non-pointer field, empty or not, so empty
//! strings, zero non-pointer numbers and false non-pointer booleans are dropped, as Go's JSON
//! `omitempty` drops them.

use std::collections::BTreeMap;
use std::sync::OnceLock;

use serde_json::{json, Map, Value};

/// The prefix of every Kubernetes protobuf body.
const MAGIC: &[u8] = b"k8s\0";

/// Messages by name: `field=number:type` entries. Types: `s` string, `i` integer (dropped when
/// zero), `I` integer behind a pointer (kept when zero), `b`/`B` the same for booleans, `y`
/// bytes (base64 in JSON), `t` Time, `n` IntOrString, `x` ignored (status, which create
/// ignores), `{s}`/`{y}`/`{q}` maps of string to string/bytes/Quantity, `[T]` repeated T,
/// anything else a message name. Field numbers are k8s.io/api's and k8s.io/apimachinery's.
const SCHEMA: &str = "
ObjectMeta: name=1:s generateName=2:s namespace=3:s selfLink=4:s uid=5:s resourceVersion=6:s generation=7:i creationTimestamp=8:t deletionTimestamp=9:t deletionGracePeriodSeconds=10:I labels=11:{s} annotations=12:{s} ownerReferences=13:[OwnerReference] finalizers=14:[s]
OwnerReference: kind=1:s name=3:s uid=4:s apiVersion=5:s controller=6:B blockOwnerDeletion=7:B
LabelSelector: matchLabels=1:{s} matchExpressions=2:[LabelSelectorRequirement]
LabelSelectorRequirement: key=1:s operator=2:s values=3:[s]
Namespace: metadata=1:ObjectMeta spec=2:NamespaceSpec status=3:x
NamespaceSpec: finalizers=1:[s]
ConfigMap: metadata=1:ObjectMeta data=2:{s} binaryData=3:{y} immutable=4:B
Secret: metadata=1:ObjectMeta data=2:{y} type=3:s stringData=4:{s} immutable=5:B
ServiceAccount: metadata=1:ObjectMeta secrets=2:[ObjectReference] imagePullSecrets=3:[LocalObjectReference] automountServiceAccountToken=4:B
ObjectReference: kind=1:s namespace=2:s name=3:s uid=4:s apiVersion=5:s resourceVersion=6:s fieldPath=7:s
LocalObjectReference: name=1:s
Service: metadata=1:ObjectMeta spec=2:ServiceSpec status=3:x
ServiceSpec: ports=1:[ServicePort] selector=2:{s} clusterIP=3:s type=4:s externalIPs=5:[s] sessionAffinity=7:s loadBalancerIP=8:s loadBalancerSourceRanges=9:[s] externalName=10:s externalTrafficPolicy=11:s healthCheckNodePort=12:i publishNotReadyAddresses=13:b ipFamilyPolicy=17:s clusterIPs=18:[s] ipFamilies=19:[s] allocateLoadBalancerNodePorts=20:B loadBalancerClass=21:s internalTrafficPolicy=22:s trafficDistribution=23:s
ServicePort: name=1:s protocol=2:s port=3:i targetPort=4:n nodePort=5:i appProtocol=6:s
ResourceQuota: metadata=1:ObjectMeta spec=2:ResourceQuotaSpec status=3:x
ResourceQuotaSpec: hard=1:{q} scopes=2:[s]
PodTemplateSpec: metadata=1:ObjectMeta spec=2:PodSpec
PodSpec: containers=2:[Container] restartPolicy=3:s terminationGracePeriodSeconds=4:I activeDeadlineSeconds=5:I dnsPolicy=6:s nodeSelector=7:{s} serviceAccountName=8:s serviceAccount=9:s nodeName=10:s hostNetwork=11:b hostPID=12:b hostIPC=13:b imagePullSecrets=15:[LocalObjectReference] hostname=16:s subdomain=17:s schedulerName=19:s initContainers=20:[Container] automountServiceAccountToken=21:B tolerations=22:[Toleration] priorityClassName=24:s priority=25:I shareProcessNamespace=27:B runtimeClassName=29:s enableServiceLinks=30:B preemptionPolicy=31:s setHostnameAsFQDN=35:B hostUsers=37:B
Toleration: key=1:s operator=2:s value=3:s effect=4:s tolerationSeconds=5:I
Container: name=1:s image=2:s command=3:[s] args=4:[s] workingDir=5:s ports=6:[ContainerPort] env=7:[EnvVar] resources=8:ResourceRequirements terminationMessagePath=13:s imagePullPolicy=14:s stdin=16:b stdinOnce=17:b tty=18:b terminationMessagePolicy=20:s restartPolicy=24:s
ContainerPort: name=1:s hostPort=2:i containerPort=3:i protocol=4:s hostIP=5:s
EnvVar: name=1:s value=2:s
ResourceRequirements: limits=1:{q} requests=2:{q}
Deployment: metadata=1:ObjectMeta spec=2:DeploymentSpec status=3:x
DeploymentSpec: replicas=1:I selector=2:LabelSelector template=3:PodTemplateSpec strategy=4:DeploymentStrategy minReadySeconds=5:i revisionHistoryLimit=6:I paused=7:b progressDeadlineSeconds=9:I
DeploymentStrategy: type=1:s rollingUpdate=2:RollingUpdateDeployment
RollingUpdateDeployment: maxUnavailable=1:n maxSurge=2:n
Job: metadata=1:ObjectMeta spec=2:JobSpec status=3:x
JobSpec: parallelism=1:I completions=2:I activeDeadlineSeconds=3:I selector=4:LabelSelector manualSelector=5:B template=6:PodTemplateSpec backoffLimit=7:I ttlSecondsAfterFinished=8:I completionMode=9:s suspend=10:B backoffLimitPerIndex=12:I maxFailedIndexes=13:I podReplacementPolicy=14:s managedBy=15:s
CronJob: metadata=1:ObjectMeta spec=2:CronJobSpec status=3:x
CronJobSpec: schedule=1:s startingDeadlineSeconds=2:I concurrencyPolicy=3:s suspend=4:B jobTemplate=5:JobTemplateSpec successfulJobsHistoryLimit=6:I failedJobsHistoryLimit=7:I timeZone=8:s
JobTemplateSpec: metadata=1:ObjectMeta spec=2:JobSpec
Role: metadata=1:ObjectMeta rules=2:[PolicyRule]
ClusterRole: metadata=1:ObjectMeta rules=2:[PolicyRule] aggregationRule=3:AggregationRule
AggregationRule: clusterRoleSelectors=1:[LabelSelector]
PolicyRule: verbs=1:[s] apiGroups=2:[s] resources=3:[s] resourceNames=4:[s] nonResourceURLs=5:[s]
RoleBinding: metadata=1:ObjectMeta subjects=2:[Subject] roleRef=3:RoleRef
ClusterRoleBinding: metadata=1:ObjectMeta subjects=2:[Subject] roleRef=3:RoleRef
Subject: kind=1:s apiGroup=2:s name=3:s namespace=4:s
RoleRef: apiGroup=1:s kind=2:s name=3:s
PriorityClass: metadata=1:ObjectMeta value=2:I globalDefault=3:b description=4:s preemptionPolicy=5:s
PodDisruptionBudget: metadata=1:ObjectMeta spec=2:PodDisruptionBudgetSpec status=3:x
DeleteOptions: gracePeriodSeconds=1:I preconditions=2:Preconditions orphanDependents=3:B propagationPolicy=4:s dryRun=5:[s]
Preconditions: uid=1:s resourceVersion=2:s
Eviction: metadata=1:ObjectMeta deleteOptions=2:DeleteOptions
SelfSubjectAccessReview: metadata=1:ObjectMeta spec=2:SelfSubjectAccessReviewSpec status=3:x
SelfSubjectAccessReviewSpec: resourceAttributes=1:ResourceAttributes nonResourceAttributes=2:NonResourceAttributes
ResourceAttributes: namespace=1:s verb=2:s group=3:s version=4:s resource=5:s subresource=6:s name=7:s
NonResourceAttributes: path=1:s verb=2:s
TokenRequest: metadata=1:ObjectMeta spec=2:TokenRequestSpec status=3:x
TokenRequestSpec: audiences=1:[s] boundObjectRef=3:BoundObjectReference expirationSeconds=4:I
BoundObjectReference: kind=1:s apiVersion=2:s name=3:s uid=4:s
PodDisruptionBudgetSpec: minAvailable=1:n selector=2:LabelSelector maxUnavailable=3:n unhealthyPodEvictionPolicy=4:s
";

/// The messages a body may carry (the others only appear inside them).
const KINDS: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "ConfigMap",
    "CronJob",
    "DeleteOptions",
    "Deployment",
    "Eviction",
    "Job",
    "Namespace",
    "PodDisruptionBudget",
    "PriorityClass",
    "ResourceQuota",
    "Role",
    "RoleBinding",
    "Secret",
    "SelfSubjectAccessReview",
    "Service",
    "ServiceAccount",
    "TokenRequest",
];

#[derive(Debug, Clone, PartialEq)]
enum Ty {
    Str,
    Int { keep_zero: bool },
    Bool { keep_false: bool },
    Bytes,
    Time,
    IntOrString,
    Ignored,
    Map(Box<Ty>),
    Quantity,
    Repeated(Box<Ty>),
    Message(String),
}

#[derive(Debug)]
struct Field {
    name: String,
    ty: Ty,
}

type Schema = BTreeMap<String, BTreeMap<u64, Field>>;

fn parse_ty(t: &str) -> Ty {
    match t {
        "s" => Ty::Str,
        "i" => Ty::Int { keep_zero: false },
        "I" => Ty::Int { keep_zero: true },
        "b" => Ty::Bool { keep_false: false },
        "B" => Ty::Bool { keep_false: true },
        "y" => Ty::Bytes,
        "t" => Ty::Time,
        "n" => Ty::IntOrString,
        "x" => Ty::Ignored,
        "q" => Ty::Quantity,
        _ => {
            if let Some(inner) = t.strip_prefix('{').and_then(|t| t.strip_suffix('}')) {
                Ty::Map(Box::new(parse_ty(inner)))
            } else if let Some(inner) = t.strip_prefix('[').and_then(|t| t.strip_suffix(']')) {
                Ty::Repeated(Box::new(parse_ty(inner)))
            } else {
                Ty::Message(t.to_string())
            }
        }
    }
}

fn schema() -> &'static Schema {
    static SCHEMA_TABLE: OnceLock<Schema> = OnceLock::new();
    SCHEMA_TABLE.get_or_init(|| {
        let mut out = Schema::new();
        for line in SCHEMA.lines().filter(|l| !l.trim().is_empty()) {
            let (name, fields) = line.split_once(':').expect("`Message: fields`");
            let mut m = BTreeMap::new();
            for f in fields.split_whitespace() {
                let (field, ty) = f.split_once(':').expect("`field=n:type`");
                let (field, number) = field.split_once('=').expect("`field=n`");
                m.insert(
                    number.parse().expect("a field number"),
                    Field {
                        name: field.to_string(),
                        ty: parse_ty(ty),
                    },
                );
            }
            out.insert(name.trim().to_string(), m);
        }
        out
    })
}

/// Why a protobuf body cannot be read; the caller answers 415 or 400 with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ProtobufError {
    #[error("not a Kubernetes protobuf body (no k8s\\0 prefix)")]
    NoMagic,
    #[error("malformed protobuf: {0}")]
    Malformed(String),
    #[error("the simulator does not decode protobuf for kind {0:?}; send JSON or YAML (kubectl apply --server-side, kubectl create -f)")]
    UnknownKind(String),
    #[error("the simulator does not know protobuf field {number} of {message}; send JSON or YAML")]
    UnknownField { message: String, number: u64 },
}

/// Decodes a `application/vnd.kubernetes.protobuf` body into the object as JSON, with
/// `apiVersion` and `kind` from its envelope.
pub fn decode(body: &[u8]) -> Result<Value, ProtobufError> {
    let rest = body.strip_prefix(MAGIC).ok_or(ProtobufError::NoMagic)?;
    let (mut api_version, mut kind, mut raw) = (String::new(), String::new(), None);
    for (number, value) in Reader(rest).fields()? {
        match (number, value) {
            (1, Wire::Bytes(tm)) => {
                for (n, v) in Reader(tm).fields()? {
                    match (n, v) {
                        (1, Wire::Bytes(s)) => api_version = utf8(s)?,
                        (2, Wire::Bytes(s)) => kind = utf8(s)?,
                        _ => {}
                    }
                }
            }
            (2, Wire::Bytes(r)) => raw = Some(r),
            (3, Wire::Bytes(enc)) if !enc.is_empty() => {
                return Err(ProtobufError::Malformed(format!(
                    "content encoding {:?} is not supported",
                    String::from_utf8_lossy(enc)
                )))
            }
            _ => {}
        }
    }
    if !KINDS.contains(&kind.as_str()) {
        return Err(ProtobufError::UnknownKind(kind));
    }
    let mut obj = message(&kind, raw.unwrap_or(&[]))?;
    obj.insert("apiVersion".into(), json!(api_version));
    obj.insert("kind".into(), json!(kind));
    Ok(Value::Object(obj))
}

fn message(name: &str, bytes: &[u8]) -> Result<Map<String, Value>, ProtobufError> {
    let fields = schema()
        .get(name)
        .ok_or_else(|| ProtobufError::UnknownKind(name.to_string()))?;
    let mut out = Map::new();
    for (number, wire) in Reader(bytes).fields()? {
        let Some(field) = fields.get(&number) else {
            if wire.is_empty() {
                // Go writes every non-pointer field; an empty one says nothing.
                continue;
            }
            return Err(ProtobufError::UnknownField {
                message: name.to_string(),
                number,
            });
        };
        match &field.ty {
            Ty::Repeated(inner) => {
                let item = value(inner, wire, name)?.unwrap_or_else(|| empty_of(inner));
                out.entry(field.name.clone())
                    .or_insert_with(|| json!([]))
                    .as_array_mut()
                    .expect("repeated fields are arrays")
                    .push(item);
            }
            Ty::Map(inner) => {
                let Wire::Bytes(entry) = wire else {
                    return Err(malformed(name, &field.name));
                };
                let (mut key, mut val) = (String::new(), None);
                for (n, w) in Reader(entry).fields()? {
                    match n {
                        1 => key = string(w, name, &field.name)?,
                        2 => val = value(inner, w, name)?,
                        _ => {}
                    }
                }
                let val = val.unwrap_or_else(|| empty_of(inner));
                out.entry(field.name.clone())
                    .or_insert_with(|| json!({}))
                    .as_object_mut()
                    .expect("map fields are objects")
                    .insert(key, val);
            }
            ty => {
                if let Some(v) = value(ty, wire, name)? {
                    out.insert(field.name.clone(), v);
                }
            }
        }
    }
    Ok(out)
}

/// The JSON of an item whose bytes were all defaults (an empty string in a list stays one).
fn empty_of(ty: &Ty) -> Value {
    match ty {
        Ty::Str | Ty::Bytes | Ty::Quantity => json!(""),
        Ty::Int { .. } => json!(0),
        Ty::Bool { .. } => json!(false),
        Ty::Message(_) => json!({}),
        _ => Value::Null,
    }
}

/// One field's JSON value; `None` when Go's JSON would leave it out.
fn value(ty: &Ty, wire: Wire<'_>, message_name: &str) -> Result<Option<Value>, ProtobufError> {
    Ok(match ty {
        Ty::Str => Some(json!(string(wire, message_name, "string")?)).filter(|v| v != ""),
        Ty::Int { keep_zero } => {
            let n = varint(wire, message_name)? as i64;
            (n != 0 || *keep_zero).then(|| json!(n))
        }
        Ty::Bool { keep_false } => {
            let b = varint(wire, message_name)? != 0;
            (b || *keep_false).then(|| json!(b))
        }
        Ty::Bytes => {
            let Wire::Bytes(b) = wire else {
                return Err(malformed(message_name, "bytes"));
            };
            Some(json!(super::defaults::base64(b)))
        }
        Ty::Quantity => {
            let Wire::Bytes(b) = wire else {
                return Err(malformed(message_name, "Quantity"));
            };
            let mut q = String::new();
            for (n, w) in Reader(b).fields()? {
                if n == 1 {
                    q = string(w, message_name, "Quantity")?;
                }
            }
            Some(json!(q))
        }
        Ty::Time => {
            let Wire::Bytes(b) = wire else {
                return Err(malformed(message_name, "Time"));
            };
            let mut seconds = None;
            for (n, w) in Reader(b).fields()? {
                if n == 1 {
                    seconds = Some(varint(w, message_name)? as i64);
                }
            }
            // An empty Time is Go's zero time, which JSON writes as null.
            seconds.map(|s| json!(super::clock::rfc3339(s)))
        }
        Ty::IntOrString => {
            let Wire::Bytes(b) = wire else {
                return Err(malformed(message_name, "IntOrString"));
            };
            let (mut is_string, mut int, mut string_value) = (false, 0i64, String::new());
            for (n, w) in Reader(b).fields()? {
                match n {
                    1 => is_string = varint(w, message_name)? == 1,
                    2 => int = varint(w, message_name)? as i32 as i64,
                    3 => string_value = string(w, message_name, "IntOrString")?,
                    _ => {}
                }
            }
            Some(if is_string {
                json!(string_value)
            } else {
                json!(int)
            })
        }
        Ty::Ignored => None,
        Ty::Message(m) => {
            let Wire::Bytes(b) = wire else {
                return Err(malformed(message_name, m));
            };
            Some(Value::Object(message(m, b)?))
        }
        Ty::Map(_) | Ty::Repeated(_) => {
            return Err(ProtobufError::Malformed(format!(
                "{message_name}: nested repeated or map fields are not supported"
            )))
        }
    })
}

fn malformed(message: &str, field: &str) -> ProtobufError {
    ProtobufError::Malformed(format!("{message}.{field}: unexpected wire type"))
}

fn utf8(b: &[u8]) -> Result<String, ProtobufError> {
    String::from_utf8(b.to_vec()).map_err(|_| ProtobufError::Malformed("invalid UTF-8".into()))
}

fn string(w: Wire<'_>, message: &str, field: &str) -> Result<String, ProtobufError> {
    match w {
        Wire::Bytes(b) => utf8(b),
        _ => Err(malformed(message, field)),
    }
}

fn varint(w: Wire<'_>, message: &str) -> Result<u64, ProtobufError> {
    match w {
        Wire::Varint(v) => Ok(v),
        _ => Err(malformed(message, "integer")),
    }
}

/// One field's value as it is on the wire.
#[derive(Debug, Clone, Copy)]
enum Wire<'a> {
    Varint(u64),
    Fixed(u64),
    Bytes(&'a [u8]),
}

impl Wire<'_> {
    fn is_empty(&self) -> bool {
        match self {
            Wire::Varint(v) | Wire::Fixed(v) => *v == 0,
            Wire::Bytes(b) => b.is_empty(),
        }
    }
}

struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn fields(mut self) -> Result<Vec<(u64, Wire<'a>)>, ProtobufError> {
        let mut out = Vec::new();
        while !self.0.is_empty() {
            let key = self.varint()?;
            let (number, wire_type) = (key >> 3, key & 7);
            let wire = match wire_type {
                0 => Wire::Varint(self.varint()?),
                1 => Wire::Fixed(u64::from_le_bytes(
                    self.take(8)?.try_into().expect("8 bytes"),
                )),
                2 => {
                    let len = self.varint()? as usize;
                    Wire::Bytes(self.take(len)?)
                }
                5 => Wire::Fixed(u64::from(u32::from_le_bytes(
                    self.take(4)?.try_into().expect("4 bytes"),
                ))),
                t => return Err(ProtobufError::Malformed(format!("wire type {t}"))),
            };
            out.push((number, wire));
        }
        Ok(out)
    }

    fn varint(&mut self) -> Result<u64, ProtobufError> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let (&b, rest) = self
                .0
                .split_first()
                .ok_or_else(|| ProtobufError::Malformed("truncated varint".into()))?;
            self.0 = rest;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(ProtobufError::Malformed("varint too long".into()))
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], ProtobufError> {
        if self.0.len() < n {
            return Err(ProtobufError::Malformed("truncated field".into()));
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A minimal encoder for the tests: each helper returns one encoded field.
    fn key(number: u64, wire_type: u64) -> Vec<u8> {
        varint_bytes((number << 3) | wire_type)
    }
    fn varint_bytes(mut v: u64) -> Vec<u8> {
        let mut out = Vec::new();
        loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                return out;
            }
            out.push(b | 0x80);
        }
    }
    fn bytes(number: u64, b: &[u8]) -> Vec<u8> {
        let mut out = key(number, 2);
        out.extend(varint_bytes(b.len() as u64));
        out.extend_from_slice(b);
        out
    }
    fn int(number: u64, v: i64) -> Vec<u8> {
        let mut out = key(number, 0);
        out.extend(varint_bytes(v as u64));
        out
    }
    fn entry(number: u64, k: &str, v: &[u8]) -> Vec<u8> {
        bytes(number, &[bytes(1, k.as_bytes()), bytes(2, v)].concat())
    }
    fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
        let type_meta = [bytes(1, api_version.as_bytes()), bytes(2, kind.as_bytes())].concat();
        [
            MAGIC.to_vec(),
            bytes(1, &type_meta),
            bytes(2, raw),
            bytes(3, b""),
            bytes(4, b""),
        ]
        .concat()
    }

    #[test]
    fn a_configmap_as_kubectl_create_sends_it() {
        // Go writes empty non-pointer fields too: generateName, an empty creationTimestamp.
        let meta = [
            bytes(1, b"cm"),
            bytes(2, b""),
            bytes(3, b"default"),
            int(7, 0),
            bytes(8, b""),
            entry(11, "app", b"web"),
        ]
        .concat();
        let raw = [
            bytes(1, &meta),
            entry(2, "a", b"1"),
            entry(2, "b", b""),
            entry(3, "bin", &[0, 1]),
        ]
        .concat();
        let v = decode(&envelope("v1", "ConfigMap", &raw)).unwrap();
        assert_eq!(
            v,
            json!({
                "metadata": {"name": "cm", "namespace": "default", "labels": {"app": "web"}},
                "data": {"a": "1", "b": ""},
                "binaryData": {"bin": "AAE="},
                "apiVersion": "v1",
                "kind": "ConfigMap",
            })
        );
    }

    #[test]
    fn a_deployment_keeps_pointer_zeros_and_quantities() {
        let container = [
            bytes(1, b"web"),
            bytes(2, b"nginx"),
            bytes(8, &entry(2, "cpu", &bytes(1, b"250m"))),
            bytes(6, &[int(3, 80), bytes(4, b"TCP")].concat()),
        ]
        .concat();
        let template = [
            bytes(1, &entry(11, "app", b"web")),
            bytes(
                2,
                &[bytes(2, &container), bytes(3, b""), bytes(6, b"")].concat(),
            ),
        ]
        .concat();
        let strategy = bytes(2, &bytes(1, &[int(1, 1), bytes(3, b"25%")].concat()));
        let spec = [
            int(1, 0),
            bytes(2, &entry(1, "app", b"web")),
            bytes(3, &template),
            bytes(4, &strategy),
            int(7, 0),
        ]
        .concat();
        let raw = [bytes(1, &bytes(1, b"web")), bytes(2, &spec), bytes(3, b"")].concat();
        let v = decode(&envelope("apps/v1", "Deployment", &raw)).unwrap();
        assert_eq!(v["spec"]["replicas"], 0, "a pointer's zero stays");
        assert!(v["spec"].get("paused").is_none(), "a plain false goes");
        assert_eq!(
            v["spec"]["selector"],
            json!({"matchLabels": {"app": "web"}})
        );
        assert_eq!(
            v["spec"]["strategy"],
            json!({"rollingUpdate": {"maxUnavailable": "25%"}})
        );
        let c = &v["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(c["resources"], json!({"requests": {"cpu": "250m"}}));
        assert_eq!(
            c["ports"],
            json!([{"containerPort": 80, "protocol": "TCP"}])
        );
        assert!(v.get("status").is_none());
    }

    #[test]
    fn unknown_kinds_and_fields_are_refused_by_name() {
        assert_eq!(decode(b"{}"), Err(ProtobufError::NoMagic));
        assert_eq!(
            decode(&envelope("v1", "Pod", b"")),
            Err(ProtobufError::UnknownKind("Pod".into()))
        );
        let raw = [bytes(1, &bytes(1, b"n")), bytes(9, b"x")].concat();
        assert_eq!(
            decode(&envelope("v1", "ConfigMap", &raw)),
            Err(ProtobufError::UnknownField {
                message: "ConfigMap".into(),
                number: 9
            })
        );
        // An unknown field that is empty is what Go writes for an unset field: ignored.
        let raw = [bytes(1, &bytes(1, b"n")), bytes(9, b"")].concat();
        assert!(decode(&envelope("v1", "ConfigMap", &raw)).is_ok());
        assert!(matches!(
            decode(&envelope("v1", "ConfigMap", &[0x0a, 0x05, 0x01])),
            Err(ProtobufError::Malformed(_))
        ));
    }

    #[test]
    fn every_message_the_schema_names_is_defined() {
        let s = schema();
        for k in KINDS {
            assert!(s.contains_key(*k), "{k} has no schema");
        }
        assert_eq!(
            decode(&envelope("v1", "NamespaceSpec", b"")),
            Err(ProtobufError::UnknownKind("NamespaceSpec".into())),
            "a part is not a kind"
        );
        for (name, fields) in s {
            for f in fields.values() {
                let mut ty = &f.ty;
                while let Ty::Repeated(inner) | Ty::Map(inner) = ty {
                    ty = inner;
                }
                if let Ty::Message(m) = ty {
                    assert!(s.contains_key(m), "{name}.{} names undefined {m}", f.name);
                }
            }
        }
    }
}
