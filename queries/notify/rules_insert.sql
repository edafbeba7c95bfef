INSERT INTO notify_rules VALUES ($jurisdiction, $notify_within_hours, $authority_within_hours,
                                 $basis);
