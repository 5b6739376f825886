# policy: instance-type-allowlist.rego (type PLAN)
#
# Instances may only use the instance types allowed for the stack's environment. The
# environment comes from the stack's `env:<name>` label; a stack without a known `env:` label
# gets the `dev` list, the strictest one. Applies to `aws_instance` and to the sandbox
# provider's `sandbox_instance`, on creation and on update.
# Edit `allowed_types` to add environments or types.

package spacelift

import rego.v1

allowed_types := {
	"dev": {"t3.nano", "t3.micro", "t3.small", "t3.medium"},
	"prod": {
		"t3.medium", "t3.large", "t3.xlarge",
		"m5.large", "m5.xlarge", "m5.2xlarge",
		"c5.large", "c5.xlarge", "c5.2xlarge",
		"r5.large", "r5.xlarge",
	},
}

instance_resource_types := {"aws_instance", "sandbox_instance"}

stack_envs := {env |
	some label in input.spacelift.stack.labels
	startswith(label, "env:")
	env := substring(label, 4, -1)
	allowed_types[env]
}

default envs := {"dev"}

envs := stack_envs if count(stack_envs) > 0

allowed := {t | some env in envs; some t in allowed_types[env]}

deny contains msg if {
	some rc in input.terraform.resource_changes
	rc.type in instance_resource_types
	some action in rc.change.actions
	action in {"create", "update"}
	instance_type := rc.change.after.instance_type
	not instance_type in allowed
	msg := sprintf(
		"%s uses instance type %s, which is not allowed in %s (allowed: %s)",
		[rc.address, instance_type, concat(", ", sort(envs)), concat(", ", sort(allowed))],
	)
}
