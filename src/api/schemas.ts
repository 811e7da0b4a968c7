import { z } from 'zod';
import { ERROR_CODES } from '../domain/errors.ts';
import { PLAN_IDS, TIER_IDS, CYCLES } from '../domain/plans.ts';
import { VM_STATUSES } from '../domain/vmState.ts';
import { EGRESS_MODES, MAX_ALLOW_ENTRIES } from '../domain/egress.ts';
import { EVENT_TYPES } from '../domain/eventTypes.ts';

/** One place for every request and response shape: validation, serialisation and the OpenAPI document. */

/** Text that PostgreSQL can store: anything but NUL. */
const text = () => z.string().regex(/^[^\u0000]*$/, 'must not contain NUL bytes');
const timestamp = z.iso.datetime().meta({ description: 'RFC 3339 UTC timestamp' });
const plan = z.enum(PLAN_IDS);
const tier = z.enum(TIER_IDS);
const scope = z.enum(['read', 'readwrite']);

export const ErrorBody = z
  .strictObject({
    error: z.enum(ERROR_CODES).meta({ description: 'Stable machine code' }),
    message: z.string().meta({ description: 'Human-safe detail; empty when the error is internal' }),
    hint: z.string().optional().meta({ description: 'Recovery hint' }),
  })
  .meta({ id: 'Error' });

export const Whoami = z
  .object({
    tenant_id: z.string(),
    email: z.email().optional(),
    scope: scope.optional(),
    key_label: z.string().optional(),
  })
  .meta({ id: 'Whoami' });

export const HarnessSchema = z
  .object({
    id: z.string(),
    display_name: z.string(),
    description: z.string(),
    auth: z.object({
      mode: z.enum(['byok', 'login', 'none']),
      env: z.array(z.string()).meta({ description: 'Environment variables a bring-your-own-key harness reads' }),
      login_command: z.string().nullable().meta({ description: 'The one-time login command, for mode `login`' }),
    }),
    providers: z.array(z.string()),
    default: z.boolean(),
  })
  .meta({ id: 'Harness' });

export const HarnessList = z
  .object({ data: z.array(HarnessSchema), default: z.string() })
  .meta({ id: 'HarnessList' });

export const Egress = z
  .strictObject({
    mode: z.enum(EGRESS_MODES).meta({ description: '`none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address' }),
    allow: z
      .array(z.string().max(300))
      .max(MAX_ALLOW_ENTRIES)
      .meta({
        description:
          'Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode',
      }),
  })
  .meta({
    id: 'Egress',
    description:
      "What the VM may reach through its host's egress gateway. Whatever the policy, private, loopback, link-local and the host's own addresses are never reached.",
  });

export const VmStatus = z.enum([...VM_STATUSES, 'deleted']).meta({ id: 'VMStatus' });

export const Vm = z
  .object({
    vm_id: z.string(),
    preview_label: z.string().meta({
      description:
        "The VM's label in its preview hosts (`{port}-{preview_label}.{domain}`) and its hostname: its id lowercased, `_` as `-`; E2B's sandbox id. GET /v1/api/vms/{id} takes it in place of the id (extension)",
    }),
    status: VmStatus,
    status_reason: z.string().nullable().meta({ description: 'Why the platform, not the customer, put the VM in its status' }),
    plan: plan.nullable(),
    cycle: z.enum(CYCLES).nullable(),
    tier: tier.nullable(),
    harness: z.string(),
    harness_display: z.string(),
    ipv4: z.ipv4().meta({
      format: 'ipv4',
      description:
        "The VM's address in its own network on its host (10.128.0.0/9, the guest at .15; a VM that started by taking a standby VM has one of 10.224.0.0/11), kept for the VM's life",
    }).nullable(),
    template_id: z.string().nullable(),
    image: z.string().meta({ description: "The image the VM's root starts from: `base`, or an `img_` id (extension). Restart resets the root to it; reprovision moves the VM to the newest build of its name" }),
    vcpus: z.int(),
    memory_mib: z.int(),
    disk_gib: z.int(),
    secret_names: z.array(z.string()).meta({ description: 'Names of the harness credentials set on the VM (extension)' }),
    brokered_secret_names: z.array(z.string()).meta({
      description: "The secrets the platform keeps and its gateway adds to the provider's requests; they never enter the guest (extension)",
    }),
    egress: Egress,
    auto_stop_after_s: z.int().nullable().meta({
      description: 'Stopped (status_reason `idle`) after this many seconds running without a run, a shell or egress traffic (time suspended does not count); null: never (extension)',
    }),
    expires_at: timestamp.nullable().meta({ description: 'Destroyed at this time (status_reason `expired`); null: never (extension)' }),
    auto_resume: z.boolean().meta({ description: 'A request to one of its preview URLs starts the VM when it is suspended, and waits for it (≤ 30 s) (extension)' }),
    cost_cents_month: z.int().meta({
      description: "What the VM has cost since the calendar month began (UTC), from the ledger: plan charges and credits drawn for it (extension)",
    }),
    created_at: timestamp,
    updated_at: timestamp,
  })
  .meta({ id: 'VM' });

/** Idle stop and expiry as requests give them (create, fork, PATCH). */
const autoStopAfter = z
  .int()
  .min(60)
  .max(604_800)
  .nullable()
  .meta({ description: 'Stop the VM after this many seconds without a run, a shell or egress traffic (60–604800); null: never' });
const expiresAt = z.iso
  .datetime({ offset: true })
  .nullable()
  .meta({ description: 'Destroy the VM at this RFC 3339 time (in the future); null: never' });

const autoResume = z.boolean().meta({ description: 'A request to a preview URL of the VM starts it when it is suspended (default false)' });

export const UpdateVmRequest = z
  .strictObject({
    auto_stop_after_s: autoStopAfter.optional(),
    expires_at: expiresAt.optional(),
    auto_resume: autoResume.optional(),
  })
  .meta({ id: 'UpdateVMRequest', description: 'Only these fields; a field left out keeps its value, null clears it' });

export const VmList = z.object({ data: z.array(Vm), total: z.int() }).meta({ id: 'VMList' });

export const CreateVmRequest = z
  .strictObject({
    plan: plan.optional().meta({ description: 'Flat plan; omit when using a usage tier' }),
    harness: text().max(100).optional().meta({ description: 'A harness id; omit for the platform default' }),
    cycle: z.enum(CYCLES).optional().meta({ description: 'Billing cycle of a flat plan; default monthly' }),
    tier: tier.optional().meta({ description: 'Prepaid usage tier instead of a flat plan; spot is required for count > 1' }),
    count: z.int().min(1).max(20).optional().meta({ description: 'How many VMs (a swarm, spot only); default 1' }),
    egress: Egress.optional().meta({ description: "Egress policy (extension); default: allowlist of the harness's provider API hosts" }),
    image: text().min(1).max(100).optional().meta({ description: "The image the VM's root starts from, an `img_` id or a slug (the newest ready build of that name); default `base` (extension)" }),
    auto_stop_after_s: autoStopAfter.optional(),
    expires_at: expiresAt.optional(),
    auto_resume: autoResume.optional(),
  })
  .meta({ id: 'CreateVMRequest' });

export const CreateVmResponse = z
  .object({
    vm_id: z.string(),
    status: VmStatus,
    tier: z.string().optional(),
    vm_ids: z.array(z.string()).optional().meta({ description: 'Every VM of a swarm' }),
  })
  .meta({ id: 'CreateVMResponse' });

export const RunTaskRequest = z
  .strictObject({
    task: text().min(1).max(65536),
    model: text().min(1).max(200).optional(),
    provider: text().min(1).max(100).optional(),
  })
  .meta({ id: 'RunTaskRequest' });

export const RunStatus = z
  .enum(['queued', 'running', 'succeeded', 'failed', 'timed_out', 'cancelled', 'lost'])
  .meta({ description: '`succeeded`: exit 0; `lost`: the guest went away under it (the VM stopped, restarted or crashed)' });

export const RunTaskResult = z
  .object({
    run_id: z.string().meta({ description: 'The run, kept with its output until the VM is destroyed (extension)' }),
    status: RunStatus,
    vm_id: z.string(),
    harness: z.string(),
    model: z.string().nullable(),
    provider: z.string().nullable(),
    exit_code: z.int().nullable(),
    stdout: z.string(),
    stderr: z.string(),
    timed_out: z.boolean(),
    duration_ms: z.int(),
    started_at: timestamp,
    finished_at: timestamp,
  })
  .meta({ id: 'RunTaskResult' });

export const Run = z
  .object({
    run_id: z.string(),
    vm_id: z.string(),
    status: RunStatus,
    task: z.string(),
    harness: z.string(),
    model: z.string().nullable(),
    provider: z.string().nullable(),
    exit_code: z.int().nullable(),
    stdout: z.string().nullable().meta({ description: 'What it printed (so far, while it runs; 4 MiB kept, then a truncation note); null while queued' }),
    stderr: z.string().nullable().meta({ description: 'As `stdout`, for its standard error' }),
    timed_out: z.boolean().nullable(),
    duration_ms: z.int().nullable(),
    created_at: timestamp,
    started_at: timestamp.nullable(),
    finished_at: timestamp.nullable(),
  })
  .meta({ id: 'Run', description: 'A run of a task in a VM (extension). Fields not known yet are null.' });

export const RunList = z
  .object({
    data: z.array(Run),
    total: z.int(),
    has_more: z.boolean(),
    next_offset: z.int().nullable(),
  })
  .meta({ id: 'RunList' });

export const VmWaitQuery = z.strictObject({
  status: z.enum(['running', 'stopped', 'suspended']).default('running').meta({ description: 'The status waited for' }),
  timeout_s: z.coerce.number().int().min(1).max(60).default(30)
    .meta({ type: 'integer', minimum: 1, maximum: 60, default: 30, description: 'Seconds to wait at most; then the VM is answered as it is' }),
});

export const RunListQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20).meta({ description: 'Page size, 1–100' }),
  offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0)
    .meta({ type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0, description: 'Where the page starts' }),
});



export const RunEventStream = z.string().meta({
  description:
    'Server-sent events: `stdout` and `stderr` events (`data: {"text"}`), each with an increasing `id:`; then one `end` ' +
    'event whose data is the finished Run, and the stream ends. Send `Last-Event-ID` to get only what came after that event.',
});

/** What a public capture took out of the copy (src/guest/scrub.ts). */
const ScrubReport = z.object({
  removed: z.array(z.string()).meta({ description: 'Paths deleted from the copy' }),
  redacted: z.array(z.object({ path: z.string(), count: z.int() })).meta({ description: 'Files in which secrets were replaced, and how many' }),
});

export const Template = z
  .object({
    template_id: z.string(),
    slug: z.string(),
    name: z.string(),
    description: z.string(),
    harness: z.string(),
    visibility: z.enum(['public', 'private']),
    owned: z.boolean(),
    tags: z.array(z.string()),
    forks: z.int(),
    stars: z.int(),
    size_bytes: z.int(),
    status: z.enum(['capturing', 'ready', 'failed']),
    created_at: timestamp,
    scrub_report: ScrubReport.nullable().optional().meta({
      description: 'Present only for the owner: what a public capture removed or redacted; null while capturing and for a private template',
    }),
  })
  .meta({ id: 'Template' });

export const ImagePackage = z
  .object({ name: z.string(), version: z.string() })
  .meta({ id: 'ImagePackage', description: 'An installed package: Debian packages by their dpkg name and version, and npm' });

export const Image = z
  .object({
    image_id: z.string().meta({ description: '`base`, or an `img_` id' }),
    slug: z.string(),
    name: z.string(),
    visibility: z.enum(['public', 'private']),
    status: z.enum(['queued', 'building', 'ready', 'failed']),
    status_reason: z.string().nullable().meta({ description: 'Why the image failed; null otherwise' }),
    parent: z.string().nullable().meta({ description: 'The image it is built FROM (`base` or an `img_` id); null for `base`' }),
    size_bytes: z.int().nullable().meta({ description: "What the image takes on disk (its layers: each holds only what its step wrote); null until it is ready" }),
    packages: z.array(ImagePackage).meta({
      description: "What is installed, by name; empty until the image is ready. For `base`: its Debian packages and npm; for an image: the Debian packages installed in its root (its parent's list when its build changed none)",
    }),
    created_at: timestamp.meta({ description: 'When its build began (for `base` not yet ready: when this server began to look for it)' }),
    ready_at: timestamp.nullable(),
  })
  .meta({ id: 'Image' });

export const ImageList = z
  .object({ data: z.array(Image), total: z.int(), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'ImageList' });

export const ImageListQuery = z.strictObject({
  q: text().max(200).optional().meta({ description: 'Only images whose name or slug holds this text' }),
  sort: z.enum(['new', 'trending', 'forks']).default('new').meta({
    description: "Order of the page, as the template gallery's: `new` (default) newest first; `forks` most VMs made of it first; `trending` (2 x VMs made) / (age in hours + 2)^1.5",
  }),
  visibility: z.enum(['public', 'private']).optional().meta({ description: 'Only public images (the gallery: every tenant\'s, yours too) or only your private ones' }),
  limit: z.coerce.number().int().min(1).max(100).default(20).meta({ description: 'Page size, 1–100' }),
  offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0)
    .meta({ type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0, description: 'Where the page starts' }),
});

export const CreateImageRequest = z
  .strictObject({
    name: text().min(1).max(100).meta({ description: 'The image\'s name; its slug names the newest ready build of that name' }),
    dockerfile: text().min(1).max(65536).meta({
      description:
        'One stage: `FROM base` or `FROM <image id or slug>`, then RUN, COPY, ADD (from `files`, never a URL), ENV, WORKDIR, USER and ARG. Anything else is a 400 naming its line',
    }),
    files: z.record(text().max(4096), z.string()).optional().meta({ description: 'The build\'s files: relative path → base64 content, at most 16 MiB decoded in all' }),
    visibility: z.enum(['public', 'private']).optional().meta({ description: 'Default private; a public image is listed for every tenant' }),
    egress: Egress.optional().meta({ description: 'What RUN steps may reach; default allowlist `@debian`, `@github`, `@npm`, `@pypi`' }),
  })
  .meta({ id: 'CreateImageRequest' });

export const ImageBuildEventStream = z.string().meta({
  id: 'ImageBuildEventStream',
  description:
    'Server-sent events: `id: <seq>` / `event: log` / `data: {"text"}` for each line of the build log (a step taken from the cache says `cached`), then `event: end` / `data: <Image>` once the build is ready or failed',
});

export const TemplateList = z
  .object({
    data: z.array(Template),
    total: z.int(),
    has_more: z.boolean(),
    next_offset: z.int().nullable(),
  })
  .meta({ id: 'TemplateList' });

export const TemplateListQuery = z.strictObject({
  q: text().max(200).optional().meta({ description: 'Full-text search over name, description and tags' }),
  harness: text().max(100).optional().meta({ description: 'Only templates of this harness' }),
  tag: text().max(100).optional().meta({ description: 'Only templates with this tag' }),
  sort: z.enum(['trending', 'new', 'forks', 'stars']).default('trending').meta({ description: 'Order of the page' }),
  limit: z.coerce.number().int().min(1).max(100).default(20).meta({ description: 'Page size, 1–100' }),
  offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0)
    .meta({ type: "integer", minimum: 0, maximum: 1_000_000_000, default: 0, description: 'Where the page starts' }),
});

export const ForkRequest = z
  .strictObject({
    plan: plan.optional().meta({ description: "Plan for the new VM; default the template's" }),
    egress: Egress.optional().meta({ description: "Egress policy (extension); default: allowlist of the harness's provider API hosts" }),
    image: text().min(1).max(100).optional().meta({ description: "The image the VM's root starts from, an `img_` id or a slug (the newest ready build of that name); default `base` (extension)" }),
    auto_stop_after_s: autoStopAfter.optional(),
    expires_at: expiresAt.optional(),
  })
  .meta({ id: 'ForkRequest' });

export const ForkResponse = z
  .object({
    vm_id: z.string(),
    status: VmStatus,
    tier: tier.nullable().meta({ description: "The new VM's tier; null for a plan VM" }),
    template_id: z.string(),
  })
  .meta({ id: 'ForkResponse' });

export const CaptureRequest = z
  .strictObject({
    visibility: z.enum(['public', 'private']).optional().meta({ description: 'Default private; a public template is listed in the gallery' }),
    name: text().min(1).max(100).optional().meta({ description: 'Template name; default from the harness and the VM' }),
  })
  .meta({ id: 'CaptureRequest' });

export const Billing = z
  .object({
    card_on_file: z.boolean(),
    brand: z.string().nullable(),
    last4: z.string().nullable(),
    credits_cents: z.int(),
  })
  .meta({ id: 'Billing' });

const countsBy = (ids: readonly string[]) => z.object(Object.fromEntries(ids.map((id) => [id, z.int()])));

export const Usage = z
  .object({
    vms: z.object({
      live: z.int().meta({ description: 'VMs neither stopped nor failed' }),
      running: z.int(),
      stopped: z.int(),
      by_plan: countsBy(PLAN_IDS),
      by_tier: countsBy(TIER_IDS),
    }),
    mrr: z.object({
      amount_cents: z.int().meta({ description: "Sum of the plan VMs' monthly prices (annual / 12, rounded down)" }),
      by_plan: countsBy(PLAN_IDS),
    }),
    credits: z.object({ balance_cents: z.int(), spent_month_cents: z.int() }),
  })
  .meta({ id: 'Usage' });

export const KeyRecord = z
  .object({
    key_id: z.string(),
    label: z.string(),
    scope,
    prefix: z.string().meta({ description: 'The first 12 characters of the key' }),
    created_at: timestamp,
    last_used_at: timestamp.nullable(),
  })
  .meta({ id: 'APIKey' });

export const KeyList = z.object({ data: z.array(KeyRecord) }).meta({ id: 'APIKeyList' });

export const IssueKeyRequest = z
  .strictObject({
    label: text().max(100).optional().meta({ description: 'What the key is for' }),
    scope: scope.optional().meta({ description: 'Default read' }),
    format: z
      .enum(['agentvm', 'e2b'])
      .optional()
      .meta({ description: "How the key is spelled: `avm_live_…` (default), or E2B's `e2b_` and 40 hex digits, for E2B's SDKs (extension)" }),
  })
  .meta({ id: 'IssueKeyRequest' });

export const IssuedKey = z
  .object({
    key_id: z.string(),
    key: z.string().meta({ description: 'The plaintext key, shown only here' }),
    label: z.string(),
    scope,
    prefix: z.string(),
    created_at: timestamp,
  })
  .meta({ id: 'IssuedKey' });

export const RevokedKey = KeyRecord.extend({ revoked_at: timestamp }).meta({ id: 'RevokedAPIKey' });

export const SECRET_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,127}$/;
/** Secret values reach environments and HTTP headers: no CR, LF or NUL. */
export const SetSecretsRequest = z
  .record(z.string().regex(SECRET_NAME), z.string().max(16384).regex(/^[^\r\n\u0000]*$/, 'must not contain CR, LF or NUL').nullable())
  .meta({ id: 'SetSecretsRequest', description: 'NAME: value sets a variable, NAME: null removes it' });

export const EgressLogEntry = z
  .object({
    at: timestamp,
    host: z.string(),
    port: z.int(),
    decision: z.enum(['allowed', 'denied']),
    reason: z.string(),
    bytes_out: z.int().meta({ description: 'Bytes the VM sent' }),
    bytes_in: z.int().meta({ description: 'Bytes the VM received' }),
  })
  .meta({ id: 'EgressLogEntry' });
export const EgressLog = z
  .object({ data: z.array(EgressLogEntry), has_more: z.boolean() })
  .meta({ id: 'EgressLog', description: 'Newest first; kept 7 days. Never a request body, header or key.' });
export const EgressLogQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(200).default(50).meta({ description: 'How many connections, 1–200' }),
});

export const EventType = z.enum(EVENT_TYPES).meta({ id: 'EventType' });

export const Event = z
  .object({
    event_id: z.string().meta({ description: 'Unique; a webhook receiver dedupes on it (deliveries are at least once)' }),
    type: EventType,
    created_at: timestamp,
    data: z.record(z.string(), z.unknown()).meta({
      description: 'The object as the API presented it when the event happened: a VM (vm.*), a Run (run.finished), a Template (template.*), the Billing object (credits.low) or an API key (key.*)',
    }),
  })
  .meta({ id: 'Event' });

export const EventList = z
  .object({ data: z.array(Event), has_more: z.boolean() })
  .meta({ id: 'EventList', description: 'Oldest first after the cursor; events are kept 30 days' });

export const EventListQuery = z.strictObject({
  after: z.string().max(100).optional().meta({ description: 'An event id: only events after it (the last one a reader has seen)' }),
  limit: z.coerce.number().int().min(1).max(200).default(50).meta({ description: 'How many events, 1–200' }),
});

const LedgerEntry = z
  .object({
    entry_id: z.string(),
    kind: z.enum(['card_charge', 'credit_purchase', 'credit_draw']).meta({
      description: '`card_charge`: the card on file was charged; `credit_purchase`: prepaid credits added; `credit_draw`: credits drawn for running time',
    }),
    amount_cents: z.int(),
    credits_delta_cents: z.int().meta({ description: "The entry's effect on the prepaid balance" }),
    vm_id: z.string().nullable(),
    template_id: z.string().nullable(),
    description: z.string(),
    created_at: timestamp,
  })
  .meta({ id: 'LedgerEntry' });

export const LedgerPage = z
  .object({ data: z.array(LedgerEntry), total: z.int(), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'LedgerPage', description: 'Newest first' });

export const VmMetrics = z
  .object({
    cpu_percent: z.number().meta({ description: "CPU use over the last sampling interval, as a percent of the VM's vCPUs together (100: every vCPU busy)" }),
    memory_used_mib: z.int().meta({ description: 'Memory in use in the guest (MemTotal − MemAvailable); the QEMU process\'s proportional set size when the guest does not answer. A quiet VM (its QEMU under 5% of a core a vCPU) is asked at most once a minute: its memory and disk figures are then the last it gave' }),
    memory_mib: z.int().meta({ description: "The VM's memory" }),
    disk_used_bytes: z.int().meta({ description: 'Bytes used on the persist disk, as the guest sees it' }),
    disk_bytes: z.int().meta({ description: "The persist disk's size" }),
    egress_bytes_out: z.int().meta({ description: "Bytes sent through the egress gateway (its log's 7 days)" }),
    egress_bytes_in: z.int().meta({ description: 'Bytes received through the egress gateway (its log\'s 7 days)' }),
    sampled_at: timestamp.meta({ description: 'When the sample was taken: every 5 s while the VM runs; a stopped VM shows its last one' }),
  })
  .meta({ id: 'VmMetrics' });

export const PageQuery = z.strictObject({
  limit: z.coerce.number().int().min(1).max(100).default(20).meta({ description: 'Page size, 1–100' }),
  offset: z.coerce.number().int().min(0).max(1_000_000_000).default(0)
    .meta({ type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0, description: 'Where the page starts' }),
});

export const CreateWebhookRequest = z
  .strictObject({
    url: z.string().max(2048).meta({ description: 'https URL of a public address (hosts in AGENTVM_WEBHOOK_ALLOW_HOSTS may use http and loopback)' }),
    events: z.array(z.string().max(100)).min(1).max(EVENT_TYPES.length).meta({ description: `Event types to deliver: ${EVENT_TYPES.join(', ')}` }),
  })
  .meta({ id: 'CreateWebhookRequest' });

export const Webhook = z
  .object({
    webhook_id: z.string(),
    url: z.string(),
    events: z.array(EventType),
    created_at: timestamp,
  })
  .meta({ id: 'Webhook' });

export const CreatedWebhook = Webhook.extend({
  secret: z.string().meta({ description: 'Signs every delivery (agentvm-signature); shown only here' }),
}).meta({ id: 'CreatedWebhook' });

export const WebhookList = z.object({ data: z.array(Webhook) }).meta({ id: 'WebhookList' });

export const WebhookDelivery = z
  .object({
    delivery_id: z.string(),
    event_id: z.string(),
    event_type: EventType,
    status: z.enum(['pending', 'delivered', 'failed']).meta({
      description: '`pending`: not yet answered with a 2xx, retried with backoff; `delivered`: answered 2xx; `failed`: no 2xx in 24 hours',
    }),
    attempts: z.int(),
    last_status_code: z.int().nullable().meta({ description: "The receiver's HTTP status at the last attempt; null when it did not answer" }),
    last_error: z.string().nullable(),
    last_attempt_at: timestamp.nullable(),
    next_attempt_at: timestamp.nullable().meta({ description: 'When the next attempt is due; null once delivered or failed' }),
    delivered_at: timestamp.nullable(),
    created_at: timestamp,
  })
  .meta({ id: 'WebhookDelivery' });

export const WebhookDeliveryPage = z
  .object({ data: z.array(WebhookDelivery), has_more: z.boolean(), next_offset: z.int().nullable() })
  .meta({ id: 'WebhookDeliveryPage', description: 'Newest first; kept as long as their events (30 days)' });

export const WebhookParams = z.strictObject({ webhook_id: z.string().regex(/^[A-Za-z0-9_.-]{1,200}$/).meta({ description: 'A webhook id (`wh_…`)' }) });

export const LoginStartRequest = z.strictObject({ email: z.email().max(254) }).meta({ id: 'LoginStartRequest' });
export const LoginStartResponse = z
  .object({ sent: z.literal(true), expires_in_s: z.int() })
  .meta({ id: 'LoginStartResponse', description: 'Always the same answer, whether or not the email has an account' });
export const LoginCompleteRequest = z
  .strictObject({
    email: z.email().max(254),
    code: z.string().regex(/^[0-9]{6}$/),
    label: text().max(100).optional(),
  })
  .meta({ id: 'LoginCompleteRequest' });

// Operator API (not part of the customer contract).
export const CreateTenantRequest = z.strictObject({ email: z.email().max(254) });
export const CreateTenantResponse = z.object({ tenant_id: z.string(), email: z.string(), api_key: z.string() });
export const SetCardRequest = z.strictObject({
  brand: z.string().min(1).max(32).regex(/^[a-z][a-z0-9_-]*$/, 'lowercase card brand such as visa'),
  last4: z.string().regex(/^[0-9]{4}$/, 'four digits'),
});
export const AddCreditsRequest = z.strictObject({ amount_cents: z.int().min(1).max(100_000_000) });
export const CreditsBalance = z.object({ balance_cents: z.int() });

/** Ids and slugs are plain ASCII; anything else cannot name a resource, so it is answered like an unknown id. */
export const ID_PATTERN = /^[A-Za-z0-9_.-]{1,200}$/;
export const idParam = (description?: string) => z.string().regex(ID_PATTERN).meta(description ? { description } : {});
export const IdParam = z.strictObject({ id: idParam('A VM id (`vm_…`)') });
/** getVM's: an id, or the VM's preview label. */
export const IdOrLabelParam = z.strictObject({ id: idParam("A VM id (`vm_…`), or the VM's `preview_label` (`vm-…`)") });
export const RunParams = z.strictObject({ id: idParam('A VM id (`vm_…`)'), run_id: idParam('A run id (`run_…`)') });
export const NoQuery = z.strictObject({});

export const ShellTicket = z
  .object({
    url: z.string().meta({
      description:
        'The WebSocket URL of the shell (`ws://` or `wss://`), carrying a one-use ticket: connect within `expires_at`, once. ' +
        'Optional query parameters `cols` and `rows` set the first terminal size.',
    }),
    expires_at: timestamp,
  })
  .meta({ id: 'ShellTicket' });

export const FilesQuery = z.strictObject({
  path: z
    .string()
    .meta({ description: 'A path on the persist disk: relative paths are under `/persist/workspace`; absolute ones must be under `/persist`' }),
});

export const FileEntry = z
  .object({
    name: z.string(),
    type: z.enum(['file', 'dir', 'link']).meta({ description: '`link`: a symbolic link (not followed in a listing)' }),
    size: z.int().meta({ description: 'Bytes' }),
    mtime: timestamp,
  })
  .meta({ id: 'FileEntry' });

export const FileListing = z
  .object({ data: z.array(FileEntry).meta({ description: 'The entries of the directory, by name' }) })
  .meta({ id: 'FileListing', description: 'A directory' });

export const FileWritten = z
  .object({
    path: z.string().meta({ description: 'The absolute path written' }),
    size: z.int().meta({ description: 'Bytes written' }),
  })
  .meta({ id: 'FileWritten' });
