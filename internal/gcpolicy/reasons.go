package gcpolicy

// Release reasons: why a reservation counts as leaked. Each is the reason label of
// netpool_gc_releases_total, appears in the release Event's note and in `netpoolctl leaks`.
const (
	// ReasonPodDeleted: the reservation's pod no longer exists.
	ReasonPodDeleted = "PodDeleted"
	// ReasonPodReplaced: a pod of the same name exists with another UID (a StatefulSet pod
	// recreated), so the pod that made the reservation is gone.
	ReasonPodReplaced = "PodReplaced"
	// ReasonPodFinished: the pod has Succeeded or Failed; its containers never run again.
	ReasonPodFinished = "PodFinished"
	// ReasonNotInNetworkStatus: the pod runs, and its network-status no longer lists the address.
	ReasonNotInNetworkStatus = "NotInNetworkStatus"
	// ReasonNodeDeleted: the reservation's node was deleted.
	ReasonNodeDeleted = "NodeDeleted"
	// ReasonOwnerDeleted: the reservation's persistent owner (an IPAMClaim, a StatefulSet) was
	// deleted (a claim made again under its name is another claim), and no pod is bound to it.
	ReasonOwnerDeleted = "OwnerDeleted"
	// ReasonSliceEmpty: a slice (not a reservation) held no reservation of its node for the
	// controller's slice grace period and went back to its pool.
	ReasonSliceEmpty = "SliceEmpty"
	// ReasonOwnerScaledDown: the reservation's owner is a StatefulSet scaled to the reservation's
	// ordinal or below.
	ReasonOwnerScaledDown = "OwnerScaledDown"
	// ReasonSuperseded: no pod is bound to the reservation, and its persistent owner's pod is bound
	// to another address of the owner in the pool (a requested address replaced a StatefulSet
	// ordinal's; two first ADDs of one claim each claimed one).
	ReasonSuperseded = "Superseded"
)
