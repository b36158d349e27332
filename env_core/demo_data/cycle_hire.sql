-- cycle_hire: a small city bicycle-hire scheme (docks, bicycles, riders, rides, repairs).
-- Written for sqlenv-mcp's embedded demo (Apache-2.0). All names and figures are invented.
PRAGMA foreign_keys = ON;

CREATE TABLE docks (
    dock_id       INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    neighbourhood TEXT NOT NULL,
    capacity      INTEGER NOT NULL,
    latitude      REAL NOT NULL,
    longitude     REAL NOT NULL,
    opened_on     TEXT NOT NULL
);

CREATE TABLE bicycles (
    bike_id         INTEGER PRIMARY KEY,
    serial_code     TEXT NOT NULL UNIQUE,
    model           TEXT NOT NULL,
    is_electric     INTEGER NOT NULL,
    commissioned_on TEXT NOT NULL,
    retired_on      TEXT
);

CREATE TABLE riders (
    rider_id     INTEGER PRIMARY KEY,
    username     TEXT NOT NULL UNIQUE,
    plan         TEXT NOT NULL,
    signup_date  TEXT NOT NULL,
    birth_year   INTEGER,
    home_dock_id INTEGER REFERENCES docks (dock_id)
);

CREATE TABLE rides (
    ride_id       INTEGER PRIMARY KEY,
    bike_id       INTEGER NOT NULL REFERENCES bicycles (bike_id),
    rider_id      INTEGER NOT NULL REFERENCES riders (rider_id),
    start_dock_id INTEGER NOT NULL REFERENCES docks (dock_id),
    end_dock_id   INTEGER REFERENCES docks (dock_id),
    started_at    TEXT NOT NULL,
    duration_min  REAL,
    fare          REAL,
    rating        INTEGER
);

CREATE TABLE repairs (
    repair_id   INTEGER PRIMARY KEY,
    bike_id     INTEGER NOT NULL REFERENCES bicycles (bike_id),
    reported_on TEXT NOT NULL,
    issue       TEXT NOT NULL,
    cost        REAL,
    fixed_on    TEXT
);

INSERT INTO docks (dock_id, name, neighbourhood, capacity, latitude, longitude, opened_on) VALUES
    (1, 'Canal Basin', 'Docklands', 24, 53.4, -2.99, '2016-04-01'),
    (2, 'Market Square', 'Old Town', 30, 53.41, -2.98, '2016-04-01'),
    (3, 'University Gate', 'Campus', 36, 53.41, -2.97, '2016-09-15'),
    (4, 'Railway Station East', 'Old Town', 40, 53.41, -2.97, '2016-04-01'),
    (5, 'Fenwick Park', 'Fenwick', 18, 53.4, -2.96, '2017-05-20'),
    (6, 'Lighthouse Point', 'Docklands', 12, 53.39, -2.99, '2018-06-30'),
    (7, 'Science Park', 'Campus', 20, 53.42, -2.96, '2019-03-11'),
    (8, 'St. Bride''s Church', 'Old Town', 16, 53.41, -2.98, '2019-03-11'),
    (9, 'Hillcrest Road', 'Hillcrest', 14, 53.42, -2.95, '2021-08-02'),
    (10, 'Brewery Yard', 'Fenwick', 22, 53.4, -2.95, '2023-05-15');

INSERT INTO bicycles (bike_id, serial_code, model, is_electric, commissioned_on, retired_on) VALUES
    (1, 'UC-1001', 'Urban Classic', 0, '2016-03-20', NULL),
    (2, 'UC-1002', 'Urban Classic', 0, '2016-03-20', '2024-06-18'),
    (3, 'UC-1003', 'Urban Classic', 0, '2016-03-20', NULL),
    (4, 'UC-1017', 'Urban Classic', 0, '2017-05-02', NULL),
    (5, 'UC-1018', 'Urban Classic', 0, '2017-05-02', NULL),
    (6, 'UC-1040', 'Urban Classic', 0, '2019-02-25', NULL),
    (7, 'CM-0301', 'Cargo Mule', 0, '2019-02-25', NULL),
    (8, 'CM-0302', 'Cargo Mule', 0, '2021-07-19', NULL),
    (9, 'VE2-0007', 'Volt E2', 1, '2020-04-14', NULL),
    (10, 'VE2-0008', 'Volt E2', 1, '2020-04-14', '2024-05-30'),
    (11, 'VE2-0015', 'Volt E2', 1, '2021-07-19', NULL),
    (12, 'VE3-0101', 'Volt E3', 1, '2023-05-01', NULL),
    (13, 'VE3-0102', 'Volt E3', 1, '2023-05-01', NULL),
    (14, 'VE3-0117', 'Volt E3', 1, '2024-03-08', NULL),
    (15, 'UC-1066', 'Urban Classic', 0, '2024-03-08', NULL);

INSERT INTO riders (rider_id, username, plan, signup_date, birth_year, home_dock_id) VALUES
    (1, 'pedal_pusher', 'annual', '2017-02-11', 1984, 2),
    (2, 'MaraK', 'monthly', '2023-09-03', 1996, 3),
    (3, 'commuter42', 'annual', '2018-01-08', 1979, 4),
    (4, 'J.Ortega', 'pay-as-you-go', '2024-05-27', NULL, NULL),
    (5, 'lunaRides', 'monthly', '2022-04-16', 2001, 7),
    (6, 'old_spokes', 'annual', '2016-06-02', 1958, 1),
    (7, 'FreyaB', 'pay-as-you-go', '2023-11-30', 1990, NULL),
    (8, 'tandem_tom', 'annual', '2019-03-22', 1971, 5),
    (9, 'ZoeyQ', 'monthly', '2024-02-14', 2003, 3),
    (10, 'night_owl_nik', 'pay-as-you-go', '2021-10-05', NULL, 8),
    (11, 'Hassan.A', 'annual', '2020-07-07', 1988, 4),
    (12, 'greenlane', 'monthly', '2023-03-19', 1993, 10),
    (13, 'priya_k', 'pay-as-you-go', '2024-06-01', 1999, NULL),
    (14, 'BenTheBiker', 'annual', '2017-08-28', 1965, 9),
    (15, 'wheelie_wen', 'monthly', '2024-01-09', NULL, 6),
    (16, 'Dock_Hopper', 'pay-as-you-go', '2022-12-12', 1985, 2),
    (17, 'sam_on_wheels', 'annual', '2021-05-30', 1977, 5),
    (18, 'Kasia.W', 'monthly', '2024-06-20', 1998, 1);

INSERT INTO rides (ride_id, bike_id, rider_id, start_dock_id, end_dock_id, started_at, duration_min, fare, rating) VALUES
    (1, 4, 5, 3, 7, '2024-06-01 10:57', 7.7, 0.0, 5),
    (2, 2, 5, 4, 10, '2024-06-01 20:53', 17.4, 0.0, 4),
    (3, 7, 3, 1, 7, '2024-06-02 13:16', 12.3, 0.0, 4),
    (4, 3, 2, 5, 10, '2024-06-02 20:14', 12.3, 0.0, 4),
    (5, 7, 3, 7, 1, '2024-06-03 11:41', 15.6, 0.0, 4),
    (6, 14, 14, 3, 7, '2024-06-03 18:39', 12.2, 1.22, 4),
    (7, 12, 1, 4, 4, '2024-06-04 10:06', 24.3, 2.43, 4),
    (8, 4, 11, 7, 5, '2024-06-04 17:04', 14.9, 0.0, 1),
    (9, 1, 1, 7, 7, '2024-06-04 19:27', 15.0, 0.0, 2),
    (10, 12, 10, 4, 7, '2024-06-05 07:18', 6.2, 2.55, NULL),
    (11, 2, 6, 10, 3, '2024-06-05 12:49', 7.2, 0.0, 1),
    (12, 2, 6, 3, 5, '2024-06-05 21:18', 17.8, 0.0, 2),
    (13, 8, 4, 3, 4, '2024-06-06 15:08', 7.5, 2.12, NULL),
    (14, 13, 16, 1, 4, '2024-06-07 08:02', 7.8, 2.95, 5),
    (15, 12, 11, 7, 5, '2024-06-07 11:59', 13.2, 1.32, 3),
    (16, 14, 15, 7, 9, '2024-06-07 18:57', 24.8, 2.48, 3),
    (17, 14, 9, 9, 7, '2024-06-07 22:54', 9.6, 0.96, 3),
    (18, 11, 9, 4, 2, '2024-06-08 12:54', 14.8, 1.48, 5),
    (19, 11, 15, 2, 1, '2024-06-08 18:25', 11.9, 1.19, 1),
    (20, 15, 10, 2, 6, '2024-06-09 06:51', 12.4, 2.86, NULL),
    (21, 13, 3, 4, 8, '2024-06-09 09:14', 23.8, 2.38, 4),
    (22, 6, 9, 7, 2, '2024-06-09 17:43', 23.1, 0.0, 4),
    (23, 7, 1, 1, 5, '2024-06-10 07:39', 9.5, 0.0, 5),
    (24, 5, 3, 7, 7, '2024-06-10 17:35', 4.7, 0.0, 4),
    (25, 5, 3, 7, 4, '2024-06-11 10:29', 23.6, 0.0, 2),
    (26, 8, 1, 4, 1, '2024-06-11 20:25', 16.8, 0.0, 4),
    (27, 13, 11, 8, 3, '2024-06-12 10:21', 13.4, 1.34, 5),
    (28, 4, 2, 5, 9, '2024-06-12 17:19', 13.0, 0.0, 2),
    (29, 9, 12, 2, 10, '2024-06-13 09:45', 18.1, 1.81, NULL),
    (30, 1, 1, 7, 9, '2024-06-13 12:08', 15.2, 0.0, NULL),
    (31, 15, 6, 6, 8, '2024-06-13 19:06', 25.5, 0.0, 4),
    (32, 7, 1, 5, 7, '2024-06-14 10:33', 10.8, 0.0, 1),
    (33, 8, 5, 1, 2, '2024-06-14 16:04', 18.4, 0.0, 1),
    (34, 4, 11, 9, 10, '2024-06-14 21:35', 12.5, 0.0, 5),
    (35, 11, 9, 1, 6, '2024-06-15 10:04', 53.9, 8.97, 1),
    (36, 5, 17, 4, 6, '2024-06-15 20:00', 18.7, 0.0, NULL),
    (37, 3, 14, 10, 3, '2024-06-16 11:27', 7.7, 0.0, 4),
    (38, 8, 11, 2, 7, '2024-06-16 15:24', 33.9, 0.58, 2),
    (39, 12, 11, 5, 10, '2024-06-16 19:21', 4.6, 0.46, 4),
    (40, 1, 5, 9, 1, '2024-06-17 09:21', 8.0, 0.0, 4),
    (41, 1, 4, 1, 9, '2024-06-17 13:18', 21.1, 4.17, 4),
    (42, 13, 3, 3, 5, '2024-06-18 06:12', 71.8, 13.45, 1),
    (43, 8, 16, 7, 8, '2024-06-18 10:09', 16.9, 3.53, 1),
    (44, 15, 5, 8, 8, '2024-06-18 12:32', 5.3, 0.0, 4),
    (45, 3, 14, 3, 9, '2024-06-18 21:01', 10.0, 0.0, NULL),
    (46, 7, 14, 7, 2, '2024-06-19 07:56', 19.8, 0.0, 4),
    (47, 15, 13, 8, 1, '2024-06-19 11:53', 11.6, 2.74, 5),
    (48, 12, 3, 10, 1, '2024-06-19 14:16', 29.4, 2.94, 4),
    (49, 11, 6, 6, 6, '2024-06-19 19:47', 66.4, 12.1, 1),
    (50, 1, 13, 9, 6, '2024-06-20 09:05', 41.0, 7.15, 4),
    (51, 1, 1, 6, 6, '2024-06-20 14:36', 15.7, 0.0, 4),
    (52, 7, 1, 2, 9, '2024-06-20 16:59', 12.4, 0.0, NULL),
    (53, 11, 8, 6, 9, '2024-06-20 19:22', 23.1, 2.31, 4),
    (54, 12, 17, 1, 1, '2024-06-21 10:49', 9.7, 0.97, 5),
    (55, 1, 8, 6, 5, '2024-06-21 17:47', 24.7, 0.0, 5),
    (56, 11, 15, 9, 10, '2024-06-21 21:44', 17.0, 1.7, 4),
    (57, 5, 5, 6, 10, '2024-06-22 08:39', 8.8, 0.0, 1),
    (58, 4, 3, 10, 10, '2024-06-22 14:10', 13.9, 0.0, 5),
    (59, 7, 11, 9, 8, '2024-06-22 19:41', 20.7, 0.0, 1),
    (60, 5, 15, 10, 2, '2024-06-23 11:08', 12.1, 0.0, 3),
    (61, 8, 2, 8, 7, '2024-06-23 13:31', 9.8, 0.0, 5),
    (62, 12, 14, 1, 2, '2024-06-24 09:23', 51.3, 8.32, 5),
    (63, 9, 6, 10, 1, '2024-06-24 11:46', 73.7, 13.93, 2),
    (64, 8, 3, 7, 10, '2024-06-24 21:42', 20.7, 0.0, 5),
    (65, 11, 2, 10, 1, '2024-06-25 07:10', 44.8, 6.7, 4),
    (66, 4, 2, 10, 3, '2024-06-25 09:33', 5.4, 0.0, NULL),
    (67, 8, 1, 10, 6, '2024-06-25 16:31', 4.6, 0.0, 4),
    (68, 1, 2, 5, 8, '2024-06-26 07:58', 14.2, 0.0, 3),
    (69, 4, 11, 3, 2, '2024-06-26 17:54', 65.6, 5.34, 2),
    (70, 15, 6, 1, 5, '2024-06-27 06:23', 27.6, 0.0, 4),
    (71, 3, 9, 9, 9, '2024-06-27 10:20', 13.0, 0.0, 5),
    (72, 9, 10, 1, 3, '2024-06-27 17:18', 10.5, 3.62, 4),
    (73, 15, 3, 5, 6, '2024-06-28 13:10', 9.2, 0.0, NULL),
    (74, 12, 17, 2, NULL, '2024-06-28 15:33', NULL, NULL, NULL);

INSERT INTO repairs (repair_id, bike_id, reported_on, issue, cost, fixed_on) VALUES
    (1, 2, '2024-06-03', 'flat tyre', 12.5, '2024-06-04'),
    (2, 9, '2024-06-05', 'battery not charging', 85.0, '2024-06-11'),
    (3, 7, '2024-06-08', 'Loose handlebars', 8.0, '2024-06-08'),
    (4, 2, '2024-06-12', 'bent frame', NULL, NULL),
    (5, 12, '2024-06-14', 'brake cable', 18.75, '2024-06-15'),
    (6, 4, '2024-06-17', 'flat tyre', 12.5, '2024-06-17'),
    (7, 9, '2024-06-19', 'Display fault', 40.0, '2024-06-21'),
    (8, 13, '2024-06-22', 'brake cable', 18.75, '2024-06-24'),
    (9, 1, '2024-06-24', 'Chain slipping', 15.0, '2024-06-25'),
    (10, 11, '2024-06-26', 'battery not charging', NULL, NULL),
    (11, 5, '2024-06-27', 'flat tyre', 12.5, '2024-06-28'),
    (12, 14, '2024-06-29', 'Loose handlebars', 9.5, NULL);
