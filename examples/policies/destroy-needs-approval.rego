# policy: destroy-needs-approval.rego (type APPROVAL)
#
# A run that deletes any resource needs `required_approvals` approvals from members of the
# `approvers_team` team; runs without deletions are approved automatically. Any rejection,
# from anyone, rejects the run (a rejection wins over approvals).
# Only each reviewer's newest review counts, and one reviewer counts once.

package spacelift

import rego.v1

approvers_team := "infra-leads"

required_approvals := 2

deletes_something if {
	some change in input.run.changes
	change.action == "deleted"
}

team_approvers := {review.author |
	some review in input.reviews.current.approvals
	approvers_team in review.session.teams
}

approve if not deletes_something

approve if {
	deletes_something
	count(team_approvers) >= required_approvals
}

reject if count(input.reviews.current.rejections) > 0
