/**
 * Network slots of standby VMs (made ahead of need, before any VM is theirs): the upper quarter of the
 * range. A VM that takes a standby takes its slot too; the placement of new VMs (store/vms.ts) hands
 * out the rest. The driver's standby pool (vmm/standby.ts) takes its slots from here.
 */
export const STANDBY_SLOTS = { first: 0x6000, last: 0x7fff } as const;
