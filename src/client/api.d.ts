// Generated from the customer OpenAPI document by `npm run gen:client`. Do not edit.
export interface paths {
    "/v1/api/whoami": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Identify the calling key */
        get: operations["whoami"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/harnesses": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the agent runtimes (harnesses) a VM can run */
        get: operations["listHarnesses"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/harnesses/{name}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get one harness */
        get: operations["getHarness"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the tenant's VMs, newest first */
        get: operations["listVMs"];
        put?: never;
        /**
         * Provision a VM (charges money)
         * @description Charges the card on file for a flat plan, or needs an hour of prepaid credits per VM for a usage tier. Send an Idempotency-Key header to retry safely: the first response is replayed and the charge happens once.
         */
        post: operations["createVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get one VM */
        get: operations["getVM"];
        put?: never;
        post?: never;
        /** Destroy a VM: metering stops and its disks are removed (extension) */
        delete: operations["destroyVM"];
        options?: never;
        head?: never;
        /**
         * Change a VM's idle stop, expiry and auto-resume (extension)
         * @description The body holds only `auto_stop_after_s`, `expires_at` and `auto_resume`; a field left out keeps its value, null clears it. Setting `auto_stop_after_s` starts the idle clock again. Activity is a run queued or running, an open shell, egress traffic or a preview request. `auto_resume`: a request to a preview URL of the suspended VM starts it and waits for it (≤ 30 s).
         */
        patch: operations["updateVM"];
        trace?: never;
    };
    "/v1/api/vms/{id}/stop": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Stop a VM: compute pauses, the persist disk stays */
        post: operations["stopVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/start": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Start a stopped VM */
        post: operations["startVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/restart": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Restart a VM with a fresh root filesystem; the persist disk stays */
        post: operations["restartVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/reprovision": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /** Rebuild the guest from the current image; the persist disk stays */
        post: operations["reprovisionVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/run": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Run one headless task with the VM's harness
         * @description The server builds the command from the harness; the task is passed as one argument, never through a shell. Runs of one VM go one at a time in the order they came. The run is a record (extension): it goes on if the client goes away, and `GET …/runs/{run_id}` or its event stream has it. With `Prefer: respond-async` the answer is 202 with the queued Run at once.
         */
        post: operations["runVMTask"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/runs": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A VM's runs, newest first (extension)
         * @description Every run of the VM, queued, running or finished, with its output; kept until the VM is destroyed.
         */
        get: operations["listVMRuns"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/runs/{run_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One run of a VM, with its output so far (extension) */
        get: operations["getVMRun"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/runs/{run_id}/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A run's output as server-sent events, live, then its end (extension)
         * @description Output reaches the stream as the guest prints it. Any number of clients may follow one run; a finished run replays and ends. After a dropped connection, send the last `id:` seen as `Last-Event-ID` to go on exactly after it.
         */
        get: operations["streamVMRun"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/runs/{run_id}/cancel": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Cancel a run: a queued one never starts, a running one has its whole process group killed (extension)
         * @description Answers the run once it has ended as `cancelled`; a run that had already finished is answered as it is.
         */
        post: operations["cancelVMRun"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/templates": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * List the caller's templates merged with the public gallery
         * @description Sort `trending` (default) ranks by (2 x forks + stars) / (age in hours + 2)^1.5; `new` by creation, newest first; `forks` and `stars` by those counts. `total` counts the whole matching set.
         */
        get: operations["listTemplates"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/templates/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a template by id or slug */
        get: operations["getTemplate"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/templates/{id}/fork": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Fork a template into a new VM (charges money)
         * @description Charges the card on file for the plan (default: the template's, else starter). There is no free fork.
         */
        post: operations["forkTemplate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/capture": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Capture a VM's persist disk as a template
         * @description Private by default. A public capture scrubs secrets from the copy and reports them in `scrub_report`.
         */
        post: operations["captureTemplate"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/billing": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Card on file and prepaid credits */
        get: operations["getBilling"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/usage": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Live VM counts, monthly recurring revenue and credits
         * @description `live` counts VMs neither stopped nor failed. MRR sums the monthly price of every plan VM (annual / 12, rounded down).
         */
        get: operations["getUsage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/keys": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** List the tenant's API keys (metadata only) */
        get: operations["listKeys"];
        put?: never;
        /** Issue an API key; the plaintext is returned once */
        post: operations["issueKey"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/keys/{key_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /**
         * Revoke an API key (extension)
         * @description The key is refused everywhere within one second. Revoking a revoked key answers it again.
         */
        delete: operations["revokeKey"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/secrets": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Set or remove bring-your-own-key variables for the harness (extension)
         * @description Values are write-only: they are never returned. The VM lists their names in `secret_names`.
         */
        put: operations["setVMSecrets"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/egress": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Replace a VM's egress policy (extension)
         * @description Applies to the VM's new connections within a second, running or not. Private, loopback, link-local and the host's own addresses stay unreachable whatever the policy.
         */
        put: operations["setVMEgress"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/egress/log": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A VM's connections through the egress gateway, newest first (extension)
         * @description Host, port, decision, reason and bytes of each connection, kept 7 days; never a request body, header or key.
         */
        get: operations["listVMEgress"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/metrics": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A VM's latest CPU, memory, persist-disk and egress sample (extension)
         * @description Its host samples each running VM every 5 s (CPU from QEMU, memory and disk from the guest agent, egress from the gateway's log). A VM that has stopped answers its last sample; one never sampled answers 409 `vm_not_running` (or 503 `unavailable` in the first seconds after it starts).
         */
        get: operations["getVMMetrics"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The tenant's events, oldest first after a cursor (extension)
         * @description Each event is written with the change it reports and carries the object as it was then. Page with `after` (the last event_id seen): an empty page means nothing new yet. Events are kept 30 days.
         */
        get: operations["listEvents"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/webhooks": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** The tenant's webhooks, newest first (extension) */
        get: operations["listWebhooks"];
        put?: never;
        /**
         * Have events POSTed to a URL (extension)
         * @description Each delivery POSTs one event as JSON with the header `agentvm-signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<body>" with the secret>`. A non-2xx answer, or none within 10 s, is retried with exponential backoff and jitter for 24 hours: at least once, so receivers dedupe on `event_id`. The URL must be https to a public address (checked again at each delivery, on the address its name resolves to); the operator may allow other hosts with AGENTVM_WEBHOOK_ALLOW_HOSTS.
         */
        post: operations["createWebhook"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/webhooks/{webhook_id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        post?: never;
        /** Delete a webhook; its pending deliveries are not sent (extension) */
        delete: operations["deleteWebhook"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/webhooks/{webhook_id}/deliveries": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * A webhook's delivery log, newest first (extension)
         * @description Each event sent to the webhook: its status (pending, delivered, failed), attempts, the last answer or error, and when it is tried next.
         */
        get: operations["listWebhookDeliveries"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/billing/ledger": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The tenant's ledger: every charge, credit purchase and draw, newest first (extension)
         * @description Append-only: a correction is a new entry. A VM's entries carry its `vm_id`; its `cost_cents_month` sums them for the month.
         */
        get: operations["listLedger"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/shell": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Open a terminal in a running VM: a WebSocket URL with a one-use ticket (extension)
         * @description A login shell as the user `agent` in `/persist/workspace`, with `TERM=xterm-256color`, the egress proxy and the brokered placeholders a run of the VM's harness has: this is how a harness with a one-time login (`opencode auth login`) is logged in. Connect to `url` within 60 seconds, once (a used or expired ticket is refused with 401). On the socket, binary frames are terminal bytes both ways; a text frame `{"type": "resize", "cols": C, "rows": R}` sets the size. The socket closes with code 1000 when the shell exits (the reason says its status), 4409 when the VM stops under it, 1001 when the server stops; closing it ends every process of the shell's session. Several shells may be open at once.
         */
        post: operations["openVMShell"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/files": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Read a file's bytes, or list a directory, on a running VM's persist disk (extension)
         * @description A file answers its bytes as `application/octet-stream` (with Content-Length); a directory answers its entries as JSON. Paths live on the persist disk: a relative path is under `/persist/workspace`, an absolute one must be under `/persist` (`/persist/.agentvm` is the platform's own). A path with `..` or NUL, or whose symbolic links lead off the disk, is 400 naming `path`. A path that does not exist is 404.
         */
        get: operations["readVMFile"];
        /**
         * Write a file on a running VM's persist disk (extension)
         * @description The body is the file's bytes (`application/octet-stream`, at most 100 MiB: 413 beyond, with nothing left behind), streamed to the VM as it comes. Missing parent directories are made; the file and they belong to the user `agent`. An existing file is replaced whole, at once, when the last byte has come: an upload cut short leaves the old file (or none), never a part. The 201 comes once the bytes are on the VM's disk (fsynced): a VM that dies a moment later keeps the file. Paths live on the persist disk: a relative path is under `/persist/workspace`, an absolute one must be under `/persist` (`/persist/.agentvm` is the platform's own). A path with `..` or NUL, or whose symbolic links lead off the disk, is 400 naming `path`.
         */
        put: operations["writeVMFile"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/auth/login/start": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Send a one-time login code to an account email (extension, for the CLI)
         * @description The code goes by mail (or, on a server without SMTP, into its log), works once, for 10 minutes; asking again retires the earlier code. The answer, and its timing, are the same whether or not the email has an account: five codes per email in 15 minutes, then 429 with Retry-After, for every email.
         */
        post: operations["loginStart"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/auth/login/complete": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Trade a login code for a new readwrite API key (extension, for the CLI)
         * @description Five wrong codes spend the code. Ten wrong codes for an email in an hour, and every code for it (the right one too) is 429 with Retry-After until the hour has passed, whether or not the email has an account. A wrong code counts against the client address too (30 failed authentications a minute, then 429 before anything is looked up). The key is labelled as asked (the CLI sends the machine name).
         */
        post: operations["loginComplete"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/suspend": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Suspend a running VM with its memory: processes resume where they were on start
         * @description The VM's memory and device state are saved on its host and its QEMU exits (status `suspending`, then `suspended`); a suspended tier VM draws no credits. `start` resumes it with its processes as they were, runs among them; stop, restart and reprovision discard the saved memory. Suspending a suspended VM changes nothing; any VM that is not running is refused (409 `vm_not_running`). Should the saved memory ever be unusable, the start boots the VM fresh from its disks and says so in `status_reason`.
         */
        post: operations["suspendVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/wait": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Wait until a VM has a status, then answer it (extension)
         * @description Answers the VM as soon as its `status` is the one asked for, or `failed`, or another status it rests in (`running`, `stopped`, `suspended`) while nothing asked of it leads to the one asked for (a suspend that failed leaves the VM `running`). After `timeout_s` it answers the VM as it is then: compare its `status`. A VM destroyed meanwhile is 404. The server hears of the change when it is committed, so a client that waits learns of it at once and sends one request, not one every few hundred milliseconds.
         */
        get: operations["waitVM"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/limits": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The tenant's limits and what it holds of each (extension)
         * @description A create, fork, capture, start, webhook, key, event stream or shell that would take a count over its limit is refused with 403 `quota_exceeded` naming the limit, its value and the current count, and charges and changes nothing. The operator changes limits per tenant (`PUT /v1/admin/tenants/{tenant_id}/limits`).
         */
        get: operations["getLimits"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/images/base": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * Get the base image: what every VM starts with, its packages and versions
         * @description The workstation image VMs run unless they name another: Debian 13 with git, curl, wget, ssh, gnupg, sudo (passwordless for the user agent), gcc, g++, make, pkg-config, Python 3 with pip and venv, Node.js with npm, jq, ripgrep, fd, zip, xz, less, procps, iproute2, vim-tiny and nano. `packages` is read from the image the VM host runs (its dpkg database, and npm).
         */
        get: operations["getBaseImage"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/images": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Your images and the public ones, newest first (extension) */
        get: operations["listImages"];
        put?: never;
        /**
         * Build an image of your own from a Dockerfile (extension)
         * @description Answers 202 with the queued image at once; the build runs in a builder VM of yours under the request's `egress` (a build FROM base whose first step is not cached takes the one its host keeps ready), each RUN as root unless a USER says otherwise. Follow it with `GET /v1/api/images/{id}/build/events`. A step whose parent and text (and, for COPY, its files) are unchanged is taken from the cache. VMs of the image (`image` on create and fork) start with its root.
         */
        post: operations["createImage"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/images/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** One image, by id or slug (`base` is the workstation image) (extension) */
        get: operations["getImage"];
        put?: never;
        post?: never;
        /**
         * Delete one of your images (extension)
         * @description A 409 `image_in_use` while a VM starts from it or another image is built on it. Its layers stay in its host's step cache, where later builds may take them, until no image or VM uses them and no build has taken them for 7 days; then the host removes them.
         */
        delete: operations["deleteImage"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/images/{id}/build/events": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * An image build's log as server-sent events, live, then its end (extension)
         * @description Exactly as a run's stream: a finished build replays and ends; after a dropped connection send the last `id:` seen as `Last-Event-ID`. A RUN step's output (stdout and stderr together) comes line by line while the step runs, each line as soon as it reaches the host; 256 KiB of it per step.
         */
        get: operations["streamImageBuild"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/ports": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /**
         * The TCP ports listening in a VM now, with their preview URLs (extension)
         * @description Ports 1024–65535, 80 and 443 that a process listens on (on every address or on loopback), read in the guest. A preview URL is private unless the port is public: it needs the API key, the preview token (`rotatePreviewToken`) or its cookie.
         */
        get: operations["listVMPorts"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/ports/{port}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        /**
         * Make a VM's port public or private (extension)
         * @description A public port answers its preview URL without a credential; ports are private by default. Nothing need listen on it yet. A sandbox made through E2B's API has every port public (its allowPublicTraffic); making one private ends that rule: the ports listening then stay public one by one.
         */
        put: operations["setVMPort"];
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/preview-token": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * A new preview token for a VM; the old one stops working at once (extension)
         * @description The token opens every private port of the VM: header `X-Agentvm-Preview-Token`, or `?agentvm_token=` on a preview URL, which sets a cookie for that one host and redirects to the URL without it. Only its hash is kept: this is the one time it is shown.
         */
        post: operations["rotatePreviewToken"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/branch": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Branch a running VM into new VMs that go on from this instant (charges money)
         * @description The VM is paused while its memory and devices are saved and its disks frozen copy-on-write, then runs on (`paused_ms`). Each new VM resumes from that instant with its processes, memory and files as they were, and its own id, hostname, machine id, address, a reseeded RNG and the right clock. Runs in flight stay with the VM branched; their processes are ended in the new VMs. Charged like a create (a plan's price per VM on the card, or an hour of credits per VM up front), all or none. New VMs start on the VM's host. A VM that is not running: 409 `vm_not_running`.
         */
        post: operations["branchVM"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/vms/{id}/snapshots": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Snapshot a running VM: memory, devices and disks; the VM runs on
         * @description The VM is paused for the saving only. The snapshot outlives the VM (destroy it and start the snapshot later), is checked (size and hash of every file) before each start, and stays on the host that took it. It counts in the `snapshots` limit and, by its size, in `disk_gib`. A VM that is not running: 409 `vm_not_running`.
         */
        post: operations["createSnapshot"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/snapshots": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Your snapshots, newest first */
        get: operations["listSnapshots"];
        put?: never;
        post?: never;
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/snapshots/{id}": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        /** Get a snapshot */
        get: operations["getSnapshot"];
        put?: never;
        post?: never;
        /**
         * Delete a snapshot; VMs started from it keep running
         * @description While a VM started from it is starting and has never run (its first start reads the snapshot's files): 409 `conflict`; a VM of it that ran, stopped or suspended since, does not hold it.
         */
        delete: operations["deleteSnapshot"];
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
    "/v1/api/snapshots/{id}/vms": {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        get?: never;
        put?: never;
        /**
         * Start new VMs from a snapshot (charges money)
         * @description Each VM resumes the snapshot's instant with an identity of its own, as a branch's do; charged like a create, all or none. The snapshot is checked first: one whose files are damaged or missing is refused with 409 `conflict` naming what is wrong, and nothing is charged.
         */
        post: operations["createVMFromSnapshot"];
        delete?: never;
        options?: never;
        head?: never;
        patch?: never;
        trace?: never;
    };
}
export type webhooks = Record<string, never>;
export interface components {
    schemas: {
        Whoami: {
            tenant_id: string;
            /** Format: email */
            email?: string;
            /** @enum {string} */
            scope?: "read" | "readwrite";
            key_label?: string;
        };
        Error: {
            /**
             * @description Stable machine code
             * @enum {string}
             */
            error: "invalid_request" | "unauthorized" | "card_required" | "insufficient_credits" | "card_declined" | "read_only_key" | "quota_exceeded" | "not_found" | "method_not_allowed" | "vm_not_running" | "idempotency_conflict" | "conflict" | "image_in_use" | "payload_too_large" | "unsupported_media_type" | "rate_limited" | "internal" | "port_closed" | "unavailable";
            /** @description Human-safe detail; empty when the error is internal */
            message: string;
            /** @description Recovery hint */
            hint?: string;
        };
        HarnessList: {
            data: components["schemas"]["Harness"][];
            default: string;
        };
        Harness: {
            id: string;
            display_name: string;
            description: string;
            auth: {
                /** @enum {string} */
                mode: "byok" | "login" | "none";
                /** @description Environment variables a bring-your-own-key harness reads */
                env: string[];
                /** @description The one-time login command, for mode `login` */
                login_command: string | null;
            };
            providers: string[];
            default: boolean;
        };
        VMList: {
            data: components["schemas"]["VM"][];
            total: number;
        };
        VM: {
            vm_id: string;
            /** @description The VM's label in its preview hosts (`{port}-{preview_label}.{domain}`) and its hostname: its id lowercased, `_` as `-`; E2B's sandbox id. GET /v1/api/vms/{id} takes it in place of the id (extension) */
            preview_label: string;
            status: components["schemas"]["VMStatus"];
            /** @description Why the platform, not the customer, put the VM in its status */
            status_reason: string | null;
            /** @enum {string|null} */
            plan: "starter" | "pro" | "max" | null;
            /** @enum {string|null} */
            cycle: "monthly" | "annual" | null;
            /** @enum {string|null} */
            tier: "ondemand" | "spot" | null;
            harness: string;
            harness_display: string;
            /**
             * Format: ipv4
             * @description The VM's address in its own network on its host (10.128.0.0/9, the guest at .15; a VM that started by taking a standby VM has one of 10.224.0.0/11), kept for the VM's life
             */
            ipv4: string | null;
            template_id: string | null;
            /** @description The image the VM's root starts from: `base`, or an `img_` id (extension). Restart resets the root to it; reprovision moves the VM to the newest build of its name */
            image: string;
            vcpus: number;
            memory_mib: number;
            disk_gib: number;
            /** @description Names of the harness credentials set on the VM (extension) */
            secret_names: string[];
            /** @description The secrets the platform keeps and its gateway adds to the provider's requests; they never enter the guest (extension) */
            brokered_secret_names: string[];
            egress: components["schemas"]["Egress"];
            /** @description Stopped (status_reason `idle`) after this many seconds running without a run, a shell or egress traffic (time suspended does not count); null: never (extension) */
            auto_stop_after_s: number | null;
            /**
             * Format: date-time
             * @description Destroyed at this time (status_reason `expired`); null: never (extension)
             */
            expires_at: string | null;
            /** @description A request to one of its preview URLs starts the VM when it is suspended, and waits for it (≤ 30 s) (extension) */
            auto_resume: boolean;
            /** @description What the VM has cost since the calendar month began (UTC), from the ledger: plan charges and credits drawn for it (extension) */
            cost_cents_month: number;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            updated_at: string;
        };
        /** @enum {string} */
        VMStatus: "provisioning" | "running" | "stopping" | "stopped" | "starting" | "restarting" | "reprovisioning" | "failed" | "suspending" | "suspended" | "deleted";
        /** @description What the VM may reach through its host's egress gateway. Whatever the policy, private, loopback, link-local and the host's own addresses are never reached. */
        Egress: {
            /**
             * @description `none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address
             * @enum {string}
             */
            mode: "none" | "allowlist" | "public";
            /** @description Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode */
            allow: string[];
        };
        CreateVMResponse: {
            vm_id: string;
            status: components["schemas"]["VMStatus"];
            tier?: string;
            /** @description Every VM of a swarm */
            vm_ids?: string[];
        };
        CreateVMRequest: {
            /**
             * @description Flat plan; omit when using a usage tier
             * @enum {string}
             */
            plan?: "starter" | "pro" | "max";
            /** @description A harness id; omit for the platform default */
            harness?: string;
            /**
             * @description Billing cycle of a flat plan; default monthly
             * @enum {string}
             */
            cycle?: "monthly" | "annual";
            /**
             * @description Prepaid usage tier instead of a flat plan; spot is required for count > 1
             * @enum {string}
             */
            tier?: "ondemand" | "spot";
            /** @description How many VMs (a swarm, spot only); default 1 */
            count?: number;
            /** @description Egress policy (extension); default: allowlist of the harness's provider API hosts */
            egress?: {
                /**
                 * @description `none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address
                 * @enum {string}
                 */
                mode: "none" | "allowlist" | "public";
                /** @description Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode */
                allow: string[];
            };
            /** @description The image the VM's root starts from, an `img_` id or a slug (the newest ready build of that name); default `base` (extension) */
            image?: string;
            /** @description Stop the VM after this many seconds without a run, a shell or egress traffic (60–604800); null: never */
            auto_stop_after_s?: number | null;
            /**
             * Format: date-time
             * @description Destroy the VM at this RFC 3339 time (in the future); null: never
             */
            expires_at?: string | null;
            /** @description A request to a preview URL of the VM starts it when it is suspended (default false) */
            auto_resume?: boolean;
        };
        RunTaskResult: {
            /** @description The run, kept with its output until the VM is destroyed (extension) */
            run_id: string;
            /**
             * @description `succeeded`: exit 0; `lost`: the guest went away under it (the VM stopped, restarted or crashed)
             * @enum {string}
             */
            status: "queued" | "running" | "succeeded" | "failed" | "timed_out" | "cancelled" | "lost";
            vm_id: string;
            harness: string;
            model: string | null;
            provider: string | null;
            exit_code: number | null;
            stdout: string;
            stderr: string;
            timed_out: boolean;
            duration_ms: number;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            started_at: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            finished_at: string;
        };
        /** @description A run of a task in a VM (extension). Fields not known yet are null. */
        Run: {
            run_id: string;
            vm_id: string;
            /**
             * @description `succeeded`: exit 0; `lost`: the guest went away under it (the VM stopped, restarted or crashed)
             * @enum {string}
             */
            status: "queued" | "running" | "succeeded" | "failed" | "timed_out" | "cancelled" | "lost";
            task: string;
            harness: string;
            model: string | null;
            provider: string | null;
            exit_code: number | null;
            /** @description What it printed (so far, while it runs; 4 MiB kept, then a truncation note); null while queued */
            stdout: string | null;
            /** @description As `stdout`, for its standard error */
            stderr: string | null;
            timed_out: boolean | null;
            duration_ms: number | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            started_at: string | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            finished_at: string | null;
        };
        RunTaskRequest: {
            task: string;
            model?: string;
            provider?: string;
        };
        RunList: {
            data: components["schemas"]["Run"][];
            total: number;
            has_more: boolean;
            next_offset: number | null;
        };
        TemplateList: {
            data: components["schemas"]["Template"][];
            total: number;
            has_more: boolean;
            next_offset: number | null;
        };
        Template: {
            template_id: string;
            slug: string;
            name: string;
            description: string;
            harness: string;
            /** @enum {string} */
            visibility: "public" | "private";
            owned: boolean;
            tags: string[];
            forks: number;
            stars: number;
            size_bytes: number;
            /** @enum {string} */
            status: "capturing" | "ready" | "failed";
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /** @description Present only for the owner: what a public capture removed or redacted; null while capturing and for a private template */
            scrub_report?: {
                /** @description Paths deleted from the copy */
                removed: string[];
                /** @description Files in which secrets were replaced, and how many */
                redacted: {
                    path: string;
                    count: number;
                }[];
            } | null;
        };
        ForkResponse: {
            vm_id: string;
            status: components["schemas"]["VMStatus"];
            /**
             * @description The new VM's tier; null for a plan VM
             * @enum {string|null}
             */
            tier: "ondemand" | "spot" | null;
            template_id: string;
        };
        ForkRequest: {
            /**
             * @description Plan for the new VM; default the template's
             * @enum {string}
             */
            plan?: "starter" | "pro" | "max";
            /** @description Egress policy (extension); default: allowlist of the harness's provider API hosts */
            egress?: {
                /**
                 * @description `none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address
                 * @enum {string}
                 */
                mode: "none" | "allowlist" | "public";
                /** @description Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode */
                allow: string[];
            };
            /** @description The image the VM's root starts from, an `img_` id or a slug (the newest ready build of that name); default `base` (extension) */
            image?: string;
            /** @description Stop the VM after this many seconds without a run, a shell or egress traffic (60–604800); null: never */
            auto_stop_after_s?: number | null;
            /**
             * Format: date-time
             * @description Destroy the VM at this RFC 3339 time (in the future); null: never
             */
            expires_at?: string | null;
        };
        CaptureRequest: {
            /**
             * @description Default private; a public template is listed in the gallery
             * @enum {string}
             */
            visibility?: "public" | "private";
            /** @description Template name; default from the harness and the VM */
            name?: string;
        };
        Billing: {
            card_on_file: boolean;
            brand: string | null;
            last4: string | null;
            credits_cents: number;
        };
        Usage: {
            vms: {
                /** @description VMs neither stopped nor failed */
                live: number;
                running: number;
                stopped: number;
                by_plan: {
                    starter: number;
                    pro: number;
                    max: number;
                };
                by_tier: {
                    ondemand: number;
                    spot: number;
                };
            };
            mrr: {
                /** @description Sum of the plan VMs' monthly prices (annual / 12, rounded down) */
                amount_cents: number;
                by_plan: {
                    starter: number;
                    pro: number;
                    max: number;
                };
            };
            credits: {
                balance_cents: number;
                spent_month_cents: number;
            };
        };
        APIKeyList: {
            data: components["schemas"]["APIKey"][];
        };
        APIKey: {
            key_id: string;
            label: string;
            /** @enum {string} */
            scope: "read" | "readwrite";
            /** @description The first 12 characters of the key */
            prefix: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            last_used_at: string | null;
        };
        IssuedKey: {
            key_id: string;
            /** @description The plaintext key, shown only here */
            key: string;
            label: string;
            /** @enum {string} */
            scope: "read" | "readwrite";
            prefix: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
        };
        IssueKeyRequest: {
            /** @description What the key is for */
            label?: string;
            /**
             * @description Default read
             * @enum {string}
             */
            scope?: "read" | "readwrite";
            /**
             * @description How the key is spelled: `avm_live_…` (default), or E2B's `e2b_` and 40 hex digits, for E2B's SDKs (extension)
             * @enum {string}
             */
            format?: "agentvm" | "e2b";
        };
        RevokedAPIKey: {
            key_id: string;
            label: string;
            /** @enum {string} */
            scope: "read" | "readwrite";
            /** @description The first 12 characters of the key */
            prefix: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            last_used_at: string | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            revoked_at: string;
        };
        /** @description NAME: value sets a variable, NAME: null removes it */
        SetSecretsRequest: {
            [key: string]: string | null;
        };
        /** @description Newest first; kept 7 days. Never a request body, header or key. */
        EgressLog: {
            data: components["schemas"]["EgressLogEntry"][];
            has_more: boolean;
        };
        EgressLogEntry: {
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            at: string;
            host: string;
            port: number;
            /** @enum {string} */
            decision: "allowed" | "denied";
            reason: string;
            /** @description Bytes the VM sent */
            bytes_out: number;
            /** @description Bytes the VM received */
            bytes_in: number;
        };
        VmMetrics: {
            /** @description CPU use over the last sampling interval, as a percent of the VM's vCPUs together (100: every vCPU busy) */
            cpu_percent: number;
            /** @description Memory in use in the guest (MemTotal − MemAvailable); the QEMU process's proportional set size when the guest does not answer. A quiet VM (its QEMU under 5% of a core a vCPU) is asked at most once a minute: its memory and disk figures are then the last it gave */
            memory_used_mib: number;
            /** @description The VM's memory */
            memory_mib: number;
            /** @description Bytes used on the persist disk, as the guest sees it */
            disk_used_bytes: number;
            /** @description The persist disk's size */
            disk_bytes: number;
            /** @description Bytes sent through the egress gateway (its log's 7 days) */
            egress_bytes_out: number;
            /** @description Bytes received through the egress gateway (its log's 7 days) */
            egress_bytes_in: number;
            /**
             * Format: date-time
             * @description When the sample was taken: every 5 s while the VM runs; a stopped VM shows its last one
             */
            sampled_at: string;
        };
        /** @description Only these fields; a field left out keeps its value, null clears it */
        UpdateVMRequest: {
            /** @description Stop the VM after this many seconds without a run, a shell or egress traffic (60–604800); null: never */
            auto_stop_after_s?: number | null;
            /**
             * Format: date-time
             * @description Destroy the VM at this RFC 3339 time (in the future); null: never
             */
            expires_at?: string | null;
            /** @description A request to a preview URL of the VM starts it when it is suspended (default false) */
            auto_resume?: boolean;
        };
        /** @description Oldest first after the cursor; events are kept 30 days */
        EventList: {
            data: components["schemas"]["Event"][];
            has_more: boolean;
        };
        Event: {
            /** @description Unique; a webhook receiver dedupes on it (deliveries are at least once) */
            event_id: string;
            type: components["schemas"]["EventType"];
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /** @description The object as the API presented it when the event happened: a VM (vm.*), a Run (run.finished), a Template (template.*), the Billing object (credits.low) or an API key (key.*) */
            data: {
                [key: string]: unknown;
            };
        };
        /** @enum {string} */
        EventType: "vm.created" | "vm.running" | "vm.stopped" | "vm.failed" | "vm.deleted" | "vm.branched" | "run.finished" | "template.ready" | "template.failed" | "snapshot.created" | "credits.low" | "key.issued" | "key.revoked";
        CreatedWebhook: {
            webhook_id: string;
            url: string;
            events: components["schemas"]["EventType"][];
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
            /** @description Signs every delivery (agentvm-signature); shown only here */
            secret: string;
        };
        CreateWebhookRequest: {
            /** @description https URL of a public address (hosts in AGENTVM_WEBHOOK_ALLOW_HOSTS may use http and loopback) */
            url: string;
            /** @description Event types to deliver: vm.created, vm.running, vm.stopped, vm.failed, vm.deleted, vm.branched, run.finished, template.ready, template.failed, snapshot.created, credits.low, key.issued, key.revoked */
            events: string[];
        };
        WebhookList: {
            data: components["schemas"]["Webhook"][];
        };
        Webhook: {
            webhook_id: string;
            url: string;
            events: components["schemas"]["EventType"][];
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
        };
        /** @description Newest first; kept as long as their events (30 days) */
        WebhookDeliveryPage: {
            data: components["schemas"]["WebhookDelivery"][];
            has_more: boolean;
            next_offset: number | null;
        };
        WebhookDelivery: {
            delivery_id: string;
            event_id: string;
            event_type: components["schemas"]["EventType"];
            /**
             * @description `pending`: not yet answered with a 2xx, retried with backoff; `delivered`: answered 2xx; `failed`: no 2xx in 24 hours
             * @enum {string}
             */
            status: "pending" | "delivered" | "failed";
            attempts: number;
            /** @description The receiver's HTTP status at the last attempt; null when it did not answer */
            last_status_code: number | null;
            last_error: string | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            last_attempt_at: string | null;
            /**
             * Format: date-time
             * @description When the next attempt is due; null once delivered or failed
             */
            next_attempt_at: string | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            delivered_at: string | null;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
        };
        /** @description Newest first */
        LedgerPage: {
            data: components["schemas"]["LedgerEntry"][];
            total: number;
            has_more: boolean;
            next_offset: number | null;
        };
        LedgerEntry: {
            entry_id: string;
            /**
             * @description `card_charge`: the card on file was charged; `credit_purchase`: prepaid credits added; `credit_draw`: credits drawn for running time
             * @enum {string}
             */
            kind: "card_charge" | "credit_purchase" | "credit_draw";
            amount_cents: number;
            /** @description The entry's effect on the prepaid balance */
            credits_delta_cents: number;
            vm_id: string | null;
            template_id: string | null;
            description: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            created_at: string;
        };
        ShellTicket: {
            /** @description The WebSocket URL of the shell (`ws://` or `wss://`), carrying a one-use ticket: connect within `expires_at`, once. Optional query parameters `cols` and `rows` set the first terminal size. */
            url: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            expires_at: string;
        };
        /** @description A directory */
        FileListing: {
            /** @description The entries of the directory, by name */
            data: components["schemas"]["FileEntry"][];
        };
        FileEntry: {
            name: string;
            /**
             * @description `link`: a symbolic link (not followed in a listing)
             * @enum {string}
             */
            type: "file" | "dir" | "link";
            /** @description Bytes */
            size: number;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            mtime: string;
        };
        FileWritten: {
            /** @description The absolute path written */
            path: string;
            /** @description Bytes written */
            size: number;
        };
        /** @description Always the same answer, whether or not the email has an account */
        LoginStartResponse: {
            /** @enum {boolean} */
            sent: true;
            expires_in_s: number;
        };
        LoginStartRequest: {
            /** Format: email */
            email: string;
        };
        LoginCompleteRequest: {
            /** Format: email */
            email: string;
            code: string;
            label?: string;
        };
        LimitsView: {
            limits: components["schemas"]["Limits"];
            usage: components["schemas"]["LimitUsage"];
        };
        /** @description The tenant's limits: the defaults, with the operator's changes */
        Limits: {
            /** @description VMs not deleted, whatever their status. Default 50 */
            vms: number;
            /** @description VMs wanted running (starting, restarting and provisioning included) that have not failed. Default 20 */
            running_vms: number;
            /** @description vCPUs of VMs running or suspended. Default 64 */
            vcpus: number;
            /** @description Memory (MiB) of VMs running or suspended. Default 131072 */
            memory_mib: number;
            /** @description Disk (GiB): persist disks of VMs not deleted, templates (each its source VM's disk), your images' layers, and snapshots (what each holds on its host). Default 1000 */
            disk_gib: number;
            /** @description Templates captured (a failed capture does not count). Default 200 */
            templates: number;
            /** @description Images of your own, queued, building or ready (not failed, not deleted). Default 20 */
            images: number;
            /** @description Snapshots kept (a branch's own saved state is not one, but its disk counts in disk_gib while it is kept). Default 50 */
            snapshots: number;
            /** @description Webhooks. Default 20 */
            webhooks: number;
            /** @description API keys not revoked. Default 100 */
            api_keys: number;
            /** @description Open run event streams and shells together, on every server. Default 100 */
            run_streams: number;
        };
        /** @description What the tenant holds now, counted as the limits count it */
        LimitUsage: {
            /** @description VMs not deleted, whatever their status */
            vms: number;
            /** @description VMs wanted running (starting, restarting and provisioning included) that have not failed */
            running_vms: number;
            /** @description vCPUs of VMs running or suspended */
            vcpus: number;
            /** @description Memory (MiB) of VMs running or suspended */
            memory_mib: number;
            /** @description Disk (GiB): persist disks of VMs not deleted, templates (each its source VM's disk), your images' layers, and snapshots (what each holds on its host) */
            disk_gib: number;
            /** @description Templates captured (a failed capture does not count) */
            templates: number;
            /** @description Images of your own, queued, building or ready (not failed, not deleted) */
            images: number;
            /** @description Snapshots kept (a branch's own saved state is not one, but its disk counts in disk_gib while it is kept) */
            snapshots: number;
            /** @description Webhooks */
            webhooks: number;
            /** @description API keys not revoked */
            api_keys: number;
            /** @description Open run event streams and shells together, on every server */
            run_streams: number;
        };
        Image: {
            /** @description `base`, or an `img_` id */
            image_id: string;
            slug: string;
            name: string;
            /** @enum {string} */
            visibility: "public" | "private";
            /** @enum {string} */
            status: "queued" | "building" | "ready" | "failed";
            /** @description Why the image failed; null otherwise */
            status_reason: string | null;
            /** @description The image it is built FROM (`base` or an `img_` id); null for `base` */
            parent: string | null;
            /** @description What the image takes on disk (its layers: each holds only what its step wrote); null until it is ready */
            size_bytes: number | null;
            /** @description What is installed, by name; empty until the image is ready. For `base`: its Debian packages and npm; for an image: the Debian packages installed in its root (its parent's list when its build changed none) */
            packages: components["schemas"]["ImagePackage"][];
            /**
             * Format: date-time
             * @description When its build began (for `base` not yet ready: when this server began to look for it)
             */
            created_at: string;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp
             */
            ready_at: string | null;
        };
        /** @description An installed package: Debian packages by their dpkg name and version, and npm */
        ImagePackage: {
            name: string;
            version: string;
        };
        CreateImageRequest: {
            /** @description The image's name; its slug names the newest ready build of that name */
            name: string;
            /** @description One stage: `FROM base` or `FROM <image id or slug>`, then RUN, COPY, ADD (from `files`, never a URL), ENV, WORKDIR, USER and ARG. Anything else is a 400 naming its line */
            dockerfile: string;
            /** @description The build's files: relative path → base64 content, at most 16 MiB decoded in all */
            files?: {
                [key: string]: string;
            };
            /**
             * @description Default private; a public image is listed for every tenant
             * @enum {string}
             */
            visibility?: "public" | "private";
            /** @description What RUN steps may reach; default allowlist `@debian`, `@github`, `@npm`, `@pypi` */
            egress?: {
                /**
                 * @description `none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address
                 * @enum {string}
                 */
                mode: "none" | "allowlist" | "public";
                /** @description Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode */
                allow: string[];
            };
        };
        ImageList: {
            data: components["schemas"]["Image"][];
            total: number;
            has_more: boolean;
            next_offset: number | null;
        };
        /** @description Server-sent events: `id: <seq>` / `event: log` / `data: {"text"}` for each line of the build log (a step taken from the cache says `cached`), then `event: end` / `data: <Image>` once the build is ready or failed */
        ImageBuildEventStream: string;
        VMPortList: {
            data: components["schemas"]["VMPort"][];
        };
        VMPort: {
            port: number;
            /** @description The name of a process that listens on it; null when unknown */
            process: string | null;
            /** @description Reachable without a credential */
            public: boolean;
            /** @description Its preview URL, `{scheme}://{port}-{vm label}.{AGENTVM_PREVIEW_DOMAIN}/` (needs a credential unless public) */
            url: string;
        };
        SetVMPortRequest: {
            /** @description true: anyone with the URL reaches the port; false: a credential is needed again */
            public: boolean;
        };
        PreviewToken: {
            /** @description The VM's preview token: header `X-Agentvm-Preview-Token`, or `?agentvm_token=` once (it becomes a cookie for that host) */
            token: string;
        };
        BranchResponse: {
            /** @description The new VMs, `provisioning` until each has resumed with its own identity */
            vm_ids: string[];
            parent_vm_id: string;
            /** @description How long the VM was paused while its memory and devices were saved and its disks frozen */
            paused_ms: number;
        };
        /** @description New VMs resumed from this instant of the VM. `count` 1–20 (default 1); more than one needs tier `spot`, as a swarm. Default plan or tier: the VM's own. A plan or tier must have the VM's size (its memory is the VMs'). Harness, image, secrets and egress are the VM's unless set here. */
        BranchRequest: {
            /**
             * @description Flat plan; omit when using a usage tier
             * @enum {string}
             */
            plan?: "starter" | "pro" | "max";
            /**
             * @description Billing cycle of a flat plan; default monthly
             * @enum {string}
             */
            cycle?: "monthly" | "annual";
            /**
             * @description Prepaid usage tier instead of a flat plan; spot is required for count > 1
             * @enum {string}
             */
            tier?: "ondemand" | "spot";
            /** @description How many VMs (a swarm, spot only); default 1 */
            count?: number;
            /** @description Egress policy (extension); default: allowlist of the harness's provider API hosts */
            egress?: {
                /**
                 * @description `none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address
                 * @enum {string}
                 */
                mode: "none" | "allowlist" | "public";
                /** @description Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode */
                allow: string[];
            };
            /** @description Stop the VM after this many seconds without a run, a shell or egress traffic (60–604800); null: never */
            auto_stop_after_s?: number | null;
            /**
             * Format: date-time
             * @description Destroy the VM at this RFC 3339 time (in the future); null: never
             */
            expires_at?: string | null;
        };
        Snapshot: {
            /** @description A `snap_` id */
            snapshot_id: string;
            /** @description The VM it was taken of (it may since have been destroyed) */
            vm_id: string;
            name: string;
            /** @description What it takes on its host: saved memory (the pages that differ from the shared base) and the disks' frozen layers */
            size_bytes: number;
            /**
             * Format: date-time
             * @description RFC 3339 UTC timestamp: the instant it holds
             */
            created_at: string;
        };
        CreateSnapshotRequest: {
            /** @description A name of yours; default: the VM id and the time */
            name?: string;
        };
        SnapshotList: {
            data: components["schemas"]["Snapshot"][];
            /** @description More, older snapshots follow: ask again with `after` the last id */
            has_more: boolean;
        };
        StartSnapshotResponse: {
            vm_ids: string[];
        };
        /** @description As a branch: `count` 1–20, more than one needs tier `spot`; default plan or tier: the VM's it was taken of, while that VM exists, else its size's plan. */
        StartSnapshotRequest: {
            /**
             * @description Flat plan; omit when using a usage tier
             * @enum {string}
             */
            plan?: "starter" | "pro" | "max";
            /**
             * @description Billing cycle of a flat plan; default monthly
             * @enum {string}
             */
            cycle?: "monthly" | "annual";
            /**
             * @description Prepaid usage tier instead of a flat plan; spot is required for count > 1
             * @enum {string}
             */
            tier?: "ondemand" | "spot";
            /** @description How many VMs (a swarm, spot only); default 1 */
            count?: number;
            /** @description Egress policy (extension); default: allowlist of the harness's provider API hosts */
            egress?: {
                /**
                 * @description `none`: nothing leaves the VM; `allowlist`: only the names in `allow`; `public`: any public address
                 * @enum {string}
                 */
                mode: "none" | "allowlist" | "public";
                /** @description Lowercase hostnames, `*.` + a domain for any of its subdomains (not over a public suffix), or a preset (`@debian`, `@npm`, `@pypi`, `@github`, `@crates`, `@go`: one entry each, expanded by the gateway); used in `allowlist` mode */
                allow: string[];
            };
            /** @description Stop the VM after this many seconds without a run, a shell or egress traffic (60–604800); null: never */
            auto_stop_after_s?: number | null;
            /**
             * Format: date-time
             * @description Destroy the VM at this RFC 3339 time (in the future); null: never
             */
            expires_at?: string | null;
        };
    };
    responses: never;
    parameters: never;
    requestBodies: never;
    headers: never;
    pathItems: never;
}
export type $defs = Record<string, never>;
export interface operations {
    whoami: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenant and key behind the bearer token */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Whoami"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listHarnesses: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The harness catalogue */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["HarnessList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getHarness: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description Harness id as listed */
                name: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The harness */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Harness"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listVMs: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The tenant's VMs */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VMList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createVM: {
        parameters: {
            query?: never;
            header?: {
                /** @description Replays the first response for the same key and body for 24 hours, charging once */
                "Idempotency-Key"?: string;
            };
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateVMRequest"];
            };
        };
        responses: {
            /** @description Accepted for provisioning */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreateVMResponse"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `card_required`: No card on file; `card_declined`: The card on file was declined; `insufficient_credits`: Prepaid credits do not cover an hour per VM */
            402: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `idempotency_conflict`: The Idempotency-Key was used with another body */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`), or the VM's `preview_label` (`vm-…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    destroyVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, with status deleted */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    updateVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["UpdateVMRequest"];
            };
        };
        responses: {
            /** @description The VM with its new settings */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    stopVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, with the transition it started */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    startVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, with the transition it started */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    restartVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, with the transition it started */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    reprovisionVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, with the transition it started */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    runVMTask: {
        parameters: {
            query?: never;
            header?: {
                /** @description `respond-async`: answer 202 with the Run at once instead of waiting for its end (extension) */
                Prefer?: string;
            };
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["RunTaskRequest"];
            };
        };
        responses: {
            /** @description The finished run */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RunTaskResult"];
                };
            };
            /** @description The run, queued (with `Prefer: respond-async`) */
            202: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Run"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listVMRuns: {
        parameters: {
            query?: {
                /** @description Page size, 1–100 */
                limit?: number;
                /** @description Where the page starts */
                offset?: number;
            };
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of runs */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RunList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getVMRun: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
                /** @description A run id (`run_…`) */
                run_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The run */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Run"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    streamVMRun: {
        parameters: {
            query?: never;
            header?: {
                /** @description The id of the last event seen: the stream starts after it */
                "Last-Event-ID"?: string;
            };
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
                /** @description A run id (`run_…`) */
                run_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The event stream */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": string;
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    cancelVMRun: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
                /** @description A run id (`run_…`) */
                run_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The run */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Run"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listTemplates: {
        parameters: {
            query?: {
                /** @description Full-text search over name, description and tags */
                q?: string;
                /** @description Only templates of this harness */
                harness?: string;
                /** @description Only templates with this tag */
                tag?: string;
                /** @description Order of the page */
                sort?: "trending" | "new" | "forks" | "stars";
                /** @description Page size, 1–100 */
                limit?: number;
                /** @description Where the page starts */
                offset?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of templates */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["TemplateList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getTemplate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A `tpl_` id, an owned slug or a public slug (owned first) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The template */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Template"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    forkTemplate: {
        parameters: {
            query?: never;
            header?: {
                /** @description Replays the first response for the same key and body for 24 hours, charging once */
                "Idempotency-Key"?: string;
            };
            path: {
                /** @description A `tpl_` id, an owned slug or a public slug (owned first) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["ForkRequest"];
            };
        };
        responses: {
            /** @description The new VM, seeded from the template */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ForkResponse"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `card_required`: No card on file; `card_declined`: The card on file was declined */
            402: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `idempotency_conflict`: The Idempotency-Key was used with another body */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    captureTemplate: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["CaptureRequest"];
            };
        };
        responses: {
            /** @description The new template, capturing */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Template"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getBilling: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Billing status */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Billing"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getUsage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Usage summary */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Usage"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listKeys: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Key metadata; never a hash or a plaintext */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["APIKeyList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    issueKey: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["IssueKeyRequest"];
            };
        };
        responses: {
            /** @description The new key, with its plaintext shown only here */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["IssuedKey"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    revokeKey: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A key id (`key_…`) */
                key_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The revoked key */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["RevokedAPIKey"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    setVMSecrets: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SetSecretsRequest"];
            };
        };
        responses: {
            /** @description The VM with its secret names */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    setVMEgress: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["Egress"];
            };
        };
        responses: {
            /** @description The VM with its new policy */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listVMEgress: {
        parameters: {
            query?: {
                /** @description How many connections, 1–200 */
                limit?: number;
            };
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The log */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EgressLog"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getVMMetrics: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The latest sample */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VmMetrics"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listEvents: {
        parameters: {
            query?: {
                /** @description An event id: only events after it (the last one a reader has seen) */
                after?: string;
                /** @description How many events, 1–200 */
                limit?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of events */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["EventList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listWebhooks: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The webhooks; never their secrets */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateWebhookRequest"];
            };
        };
        responses: {
            /** @description The webhook, with its signing secret shown only here */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["CreatedWebhook"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteWebhook: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A webhook id (`wh_…`) */
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The deleted webhook */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Webhook"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listWebhookDeliveries: {
        parameters: {
            query?: {
                /** @description Page size, 1–100 */
                limit?: number;
                /** @description Where the page starts */
                offset?: number;
            };
            header?: never;
            path: {
                /** @description A webhook id (`wh_…`) */
                webhook_id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of deliveries */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["WebhookDeliveryPage"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listLedger: {
        parameters: {
            query?: {
                /** @description Page size, 1–100 */
                limit?: number;
                /** @description Where the page starts */
                offset?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of the ledger */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LedgerPage"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    openVMShell: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The socket to connect to, and until when */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ShellTicket"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    readVMFile: {
        parameters: {
            query: {
                /** @description A path on the persist disk: relative paths are under `/persist/workspace`; absolute ones must be under `/persist` */
                path: string;
            };
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The file's bytes, or the directory's entries */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/octet-stream": string;
                    "application/json": components["schemas"]["FileListing"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    writeVMFile: {
        parameters: {
            query: {
                /** @description A path on the persist disk: relative paths are under `/persist/workspace`; absolute ones must be under `/persist` */
                path: string;
            };
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/octet-stream": string;
            };
        };
        responses: {
            /** @description The file is in place */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["FileWritten"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 100 MiB; nothing is left behind */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/octet-stream */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    loginStart: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LoginStartRequest"];
            };
        };
        responses: {
            /** @description A code is on its way if the email has an account */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LoginStartResponse"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    loginComplete: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["LoginCompleteRequest"];
            };
        };
        responses: {
            /** @description The new key, with its plaintext shown only here */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["IssuedKey"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    suspendVM: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, with the transition it started */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    waitVM: {
        parameters: {
            query?: {
                /** @description The status waited for */
                status?: "running" | "stopped" | "suspended";
                /** @description Seconds to wait at most; then the VM is answered as it is */
                timeout_s?: number;
            };
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The VM, once the wait is over or its time is up */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VM"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getLimits: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description Limits and usage, by the same names */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["LimitsView"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getBaseImage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The base image */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Image"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listImages: {
        parameters: {
            query?: {
                /** @description Only images whose name or slug holds this text */
                q?: string;
                /** @description Order of the page, as the template gallery's: `new` (default) newest first; `forks` most VMs made of it first; `trending` (2 x VMs made) / (age in hours + 2)^1.5 */
                sort?: "new" | "trending" | "forks";
                /** @description Only public images (the gallery: every tenant's, yours too) or only your private ones */
                visibility?: "public" | "private";
                /** @description Page size, 1–100 */
                limit?: number;
                /** @description Where the page starts */
                offset?: number;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description One page of images */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["ImageList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createImage: {
        parameters: {
            query?: never;
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["CreateImageRequest"];
            };
        };
        responses: {
            /** @description Not used: the build is asynchronous (202) */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Image"];
                };
            };
            /** @description The queued image */
            202: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Image"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getImage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The image */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Image"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteImage: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The deleted image */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Image"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `image_in_use`: The image is used by a VM or by another image built on it; `message` says by what */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    streamImageBuild: {
        parameters: {
            query?: never;
            header?: {
                /** @description The id of the last event seen: the stream starts after it */
                "Last-Event-ID"?: string;
            };
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The event stream */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "text/event-stream": components["schemas"]["ImageBuildEventStream"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listVMPorts: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The listening ports */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VMPortList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    setVMPort: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
                /** @description A TCP port in the VM: 1024–65535, or 80 or 443 */
                port: string;
            };
            cookie?: never;
        };
        requestBody: {
            content: {
                "application/json": components["schemas"]["SetVMPortRequest"];
            };
        };
        responses: {
            /** @description The port */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["VMPort"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    rotatePreviewToken: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The new token */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["PreviewToken"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    branchVM: {
        parameters: {
            query?: never;
            header?: {
                /** @description Replays the first response for the same key and body for 24 hours, charging once */
                "Idempotency-Key"?: string;
            };
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["BranchRequest"];
            };
        };
        responses: {
            /** @description The new VMs, provisioning */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["BranchResponse"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `card_required`: No card on file; `card_declined`: The card on file was declined; `insufficient_credits`: Prepaid credits do not cover an hour per VM */
            402: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running; `idempotency_conflict`: The Idempotency-Key was used with another body */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createSnapshot: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A VM id (`vm_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["CreateSnapshotRequest"];
            };
        };
        responses: {
            /** @description The snapshot, whole and checked */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Snapshot"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `vm_not_running`: The VM is not running */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    listSnapshots: {
        parameters: {
            query?: {
                /** @description A snapshot id: the page after it (newest first) */
                after?: string;
                /** @description Page size, 1–100 */
                limit?: number;
                /** @description Only the snapshots taken of this VM (it may since have been destroyed) */
                vm_id?: string;
            };
            header?: never;
            path?: never;
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description A page of snapshots */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["SnapshotList"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    getSnapshot: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A snapshot id (`snap_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The snapshot */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Snapshot"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    deleteSnapshot: {
        parameters: {
            query?: never;
            header?: never;
            path: {
                /** @description A snapshot id (`snap_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: never;
        responses: {
            /** @description The snapshot deleted */
            200: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Snapshot"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `conflict`: The resource already exists */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
    createVMFromSnapshot: {
        parameters: {
            query?: never;
            header?: {
                /** @description Replays the first response for the same key and body for 24 hours, charging once */
                "Idempotency-Key"?: string;
            };
            path: {
                /** @description A snapshot id (`snap_…`) */
                id: string;
            };
            cookie?: never;
        };
        requestBody?: {
            content: {
                "application/json": components["schemas"]["StartSnapshotRequest"];
            };
        };
        responses: {
            /** @description The new VMs, provisioning */
            201: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["StartSnapshotResponse"];
                };
            };
            /** @description `invalid_request`: Malformed JSON, wrong type, unknown field or value out of range; `message` names the field */
            400: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unauthorized`: Missing, malformed, unknown or revoked key; `message` is empty */
            401: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `card_required`: No card on file; `card_declined`: The card on file was declined; `insufficient_credits`: Prepaid credits do not cover an hour per VM */
            402: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `read_only_key`: A read key on a write; `quota_exceeded`: Over one of the tenant's limits (GET /v1/api/limits); `message` names the limit, its value and the current count; nothing was charged or changed */
            403: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `not_found`: Unknown or unowned id; do not retry */
            404: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `conflict`: The resource already exists; `idempotency_conflict`: The Idempotency-Key was used with another body */
            409: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `payload_too_large`: Body over 1 MiB */
            413: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unsupported_media_type`: A body that is not application/json */
            415: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `rate_limited`: Over the per-key rate; see Retry-After */
            429: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `internal`: Unexpected server error; `message` is empty, the detail is logged under the request id */
            500: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
            /** @description `unavailable`: No host capacity or the VM driver is down; see Retry-After */
            503: {
                headers: {
                    /** @description Identifies the request in the server log */
                    "X-Request-Id"?: string;
                    /** @description Seconds to wait */
                    "Retry-After"?: number;
                    [name: string]: unknown;
                };
                content: {
                    "application/json": components["schemas"]["Error"];
                };
            };
        };
    };
}
