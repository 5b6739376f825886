# policy: change-freeze.rego (type PLAN)
#
# No deployments over the weekend: tracked runs are denied from Friday 18:00 until Monday
# 06:00 in `freeze_time_zone` (an IANA zone name; daylight saving time is handled). Proposed
# runs still plan, so work can be reviewed during the freeze.
# The time is the policy request's (`input.spacelift.request.timestamp_ns`), because policies
# cannot read the clock.

package spacelift

import rego.v1

freeze_time_zone := "Europe/Berlin"

now := [input.spacelift.request.timestamp_ns, freeze_time_zone]

weekday := time.weekday(now)

hour := time.clock(now)[0]

in_freeze if {
	weekday == "Friday"
	hour >= 18
}

in_freeze if weekday in {"Saturday", "Sunday"}

in_freeze if {
	weekday == "Monday"
	hour < 6
}

deny contains msg if {
	input.spacelift.run.type == "TRACKED"
	in_freeze
	msg := sprintf("change freeze: no tracked runs from Friday 18:00 to Monday 06:00 (%s)", [freeze_time_zone])
}
