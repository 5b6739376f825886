# policy: required-tags.rego (type PLAN)
#
# Every resource that a plan creates or updates, and that has a `tags` attribute, must carry
# the tags listed in `required_tags`. Resources without a `tags` attribute are not checked.
# Each missing tag is one deny message, so the run log lists everything to fix at once.
# Edit `required_tags` to suit your organization.

package spacelift

import rego.v1

required_tags := {"owner", "env"}

# `tags` is null when a resource has none.
tag_names(tags) := object.keys(tags) if {
	is_object(tags)
} else := set()

deny contains msg if {
	some rc in input.terraform.resource_changes
	some action in rc.change.actions
	action in {"create", "update"}
	"tags" in object.keys(rc.change.after)
	some tag in required_tags - tag_names(rc.change.after.tags)
	msg := sprintf("%s is missing the required tag %s", [rc.address, tag])
}
