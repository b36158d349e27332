-- city_library: a municipal library network with five branches.
-- Written for sqlenv-mcp's embedded demo (Apache-2.0). All names and figures are invented.
PRAGMA foreign_keys = ON;

CREATE TABLE branches (
    branch_id    INTEGER PRIMARY KEY,
    name         TEXT NOT NULL,
    district     TEXT NOT NULL,
    opened_year  INTEGER,
    weekly_hours REAL
);

CREATE TABLE authors (
    author_id  INTEGER PRIMARY KEY,
    full_name  TEXT NOT NULL,
    country    TEXT,
    birth_year INTEGER
);

CREATE TABLE books (
    book_id        INTEGER PRIMARY KEY,
    title          TEXT NOT NULL,
    author_id      INTEGER NOT NULL REFERENCES authors (author_id),
    genre          TEXT NOT NULL,
    published_year INTEGER,
    pages          INTEGER,
    price          REAL,
    branch_id      INTEGER NOT NULL REFERENCES branches (branch_id)
);

CREATE TABLE members (
    member_id      INTEGER PRIMARY KEY,
    first_name     TEXT NOT NULL,
    last_name      TEXT NOT NULL,
    email          TEXT,
    joined_on      TEXT NOT NULL,
    home_branch_id INTEGER NOT NULL REFERENCES branches (branch_id),
    membership     TEXT NOT NULL
);

CREATE TABLE loans (
    loan_id     INTEGER PRIMARY KEY,
    book_id     INTEGER NOT NULL REFERENCES books (book_id),
    member_id   INTEGER NOT NULL REFERENCES members (member_id),
    loaned_on   TEXT NOT NULL,
    due_on      TEXT NOT NULL,
    returned_on TEXT,
    fine        REAL NOT NULL DEFAULT 0
);

INSERT INTO branches (branch_id, name, district, opened_year, weekly_hours) VALUES
    (1, 'Central Library', 'Old Town', 1911, 62.5),
    (2, 'Riverside', 'Riverside', 1968, 48.0),
    (3, 'Northgate', 'Northgate', 1985, 40.5),
    (4, 'Old Harbour', 'Harbour', 2003, 36.0),
    (5, 'Maple Hill', 'Maple Hill', 2019, 44.0);

INSERT INTO authors (author_id, full_name, country, birth_year) VALUES
    (1, 'Ingrid Solberg', 'Norway', 1962),
    (2, 'Tomasz Wielgus', 'Poland', 1975),
    (3, 'Amara Okafor', 'Nigeria', 1981),
    (4, 'Hugo Vansteenkiste', 'Belgium', NULL),
    (5, 'Lucía Ferreyra', 'Argentina', 1958),
    (6, 'Daniel McCrory', 'Ireland', 1970),
    (7, 'Mei-Lin Zhou', 'Canada', 1988),
    (8, 'Oskar Lindqvist', 'Sweden', 1949),
    (9, 'Priya Raghunathan', 'India', 1979),
    (10, 'Claire Dubois-Martin', 'France', NULL),
    (11, 'Samuel Adeyemi', 'Nigeria', 1990),
    (12, 'Ruth Ellwood', 'United Kingdom', 1944),
    (13, 'Kenji Morimoto', 'Japan', 1966),
    (14, 'Nora Halloran', 'Ireland', 1983);

INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price, branch_id) VALUES
    (1, 'The Salt Road', 1, 'Fiction', 2004, 342, 18.5, 1),
    (2, 'Winter Harbour', 1, 'Fiction', 2011, 288, 16.0, 4),
    (3, 'A Map of Quiet Places', 1, 'Poetry', 2016, 96, 12.0, 2),
    (4, 'The Glassmaker''s Daughter', 2, 'Fiction', 2009, 410, 21.0, 1),
    (5, 'Night Trains to Gdansk', 2, 'Mystery', 2014, 356, 17.5, 3),
    (6, 'Small Engines of Change', 3, 'Science', 2019, 224, 24.0, 1),
    (7, 'Harmattan', 3, 'Fiction', 2021, 301, 19.0, 5),
    (8, 'The Lacemakers of Bruges', 4, 'History', NULL, 512, 29.5, 1),
    (9, 'Under the Ombu Tree', 5, 'Fiction', 1995, 276, 14.0, 2),
    (10, 'Letters from Patagonia', 5, 'History', 2001, 330, 22.0, 1),
    (11, 'The Last Ferry', 6, 'Mystery', 2008, 298, 15.5, 4),
    (12, 'Dead Calm at Kinsale', 6, 'Mystery', 2012, 315, 15.5, 4),
    (13, 'The Cormorant Case', 6, 'Mystery', 2018, 322, 16.5, 3),
    (14, 'Fermentation at Home', 7, 'Cookery', 2020, 184, 27.0, 5),
    (15, 'Dumplings for Beginners', 7, 'Cookery', 2017, 156, 19.99, 2),
    (16, 'The Long Winter Count', 8, 'History', 1987, 640, 34.0, 1),
    (17, 'Moss and Granite', 8, 'Poetry', 1979, 88, 9.5, 3),
    (18, 'Monsoon Arithmetic', 9, 'Science', 2013, 264, 23.5, 1),
    (19, 'The Paper Boat Club', 9, 'Children', 2016, 64, 8.99, 5),
    (20, 'The House on the Canal', 10, 'Fiction', NULL, 298, 18.0, 2),
    (21, 'Rooftop Gardens', 10, 'Cookery', 2022, 172, 25.0, 5),
    (22, 'Lagos After Dark', 11, 'Mystery', 2022, 280, 17.0, 3),
    (23, 'The Kite That Flew Too High', 11, 'Children', 2019, 40, 7.5, 2),
    (24, 'A Brief History of Bridges', 12, 'History', 1992, 456, 26.0, 1),
    (25, 'Orchard Hymns', 12, 'Poetry', 1968, 112, 11.0, 3),
    (26, 'Signals from the Deep', 13, 'Science', 2005, 380, 28.0, 1),
    (27, 'The Clockwork Fox', 13, 'Children', 2010, 72, 9.99, 4),
    (28, 'Tidewater', 14, 'Fiction', 2015, 350, 18.5, 4),
    (29, 'Blackthorn Lane', 14, 'Mystery', 2020, 305, 16.0, 2),
    (30, 'Stars Over the Burren', 14, 'Science', NULL, 210, 21.5, 3),
    (31, 'Salt and Smoke', 2, 'Cookery', 2018, 198, 24.5, 4),
    (32, 'The Glass Orchard', 3, 'Poetry', 2023, 104, 13.5, 5);

INSERT INTO members (member_id, first_name, last_name, email, joined_on, home_branch_id, membership) VALUES
    (1, 'Alice', 'Brennan', 'alice.brennan@example.org', '2015-03-12', 1, 'standard'),
    (2, 'Bilal', 'Haddad', NULL, '2018-07-01', 2, 'student'),
    (3, 'Chloe', 'Fournier', 'chloe.f@example.net', '2019-11-23', 1, 'standard'),
    (4, 'Dmitri', 'Volkov', 'dvolkov@example.com', '2012-05-30', 3, 'senior'),
    (5, 'Elena', 'Brennan', NULL, '2020-01-15', 1, 'standard'),
    (6, 'Farah', 'Siddiqui', 'farah.s@example.org', '2021-09-04', 5, 'student'),
    (7, 'George', 'Ampofo', 'george.ampofo@example.com', '2010-02-18', 4, 'senior'),
    (8, 'Hannah', 'Kowalczyk', 'hannahk@example.net', '2017-06-09', 2, 'standard'),
    (9, 'Ivan', 'Petrov', NULL, '2022-03-27', 3, 'student'),
    (10, 'Julia', 'Santos', 'julia.santos@example.org', '2016-10-11', 4, 'standard'),
    (11, 'Kwame', 'Mensah', 'kmensah@example.com', '2014-08-19', 1, 'senior'),
    (12, 'Laura', 'Santos', NULL, '2023-02-02', 5, 'student'),
    (13, 'Marco', 'Rossi', 'marco.rossi@example.net', '2011-12-05', 2, 'senior'),
    (14, 'Niamh', 'O''Sullivan', 'niamh.os@example.org', '2019-04-14', 4, 'standard'),
    (15, 'Omar', 'Haddad', 'omar.h@example.com', '2024-01-20', 2, 'standard'),
    (16, 'Alice', 'Nakamura', 'a.nakamura@example.net', '2020-08-08', 3, 'standard'),
    (17, 'Pieter', 'de Vries', NULL, '2013-09-29', 1, 'senior'),
    (18, 'Rosa', 'Jimenez', 'rosa.j@example.org', '2024-05-06', 5, 'student'),
    (19, 'Sean', 'McCarthy', 'sean.mc@example.com', '2018-12-01', 3, 'standard'),
    (20, 'Tara', 'Whitfield', NULL, '2021-06-17', 4, 'standard');

INSERT INTO loans (loan_id, book_id, member_id, loaned_on, due_on, returned_on, fine) VALUES
    (1, 19, 13, '2024-01-08', '2024-01-29', '2024-01-12', 0.0),
    (2, 14, 12, '2024-01-12', '2024-02-02', '2024-02-04', 0.5),
    (3, 11, 4, '2024-01-15', '2024-02-05', '2024-02-18', 3.25),
    (4, 29, 4, '2024-01-19', '2024-02-09', '2024-01-26', 0.0),
    (5, 4, 11, '2024-01-23', '2024-02-13', '2024-01-30', 0.0),
    (6, 5, 4, '2024-01-26', '2024-02-16', NULL, 0.0),
    (7, 31, 17, '2024-01-31', '2024-02-21', '2024-02-29', 2.0),
    (8, 20, 4, '2024-02-06', '2024-02-27', '2024-02-10', 0.0),
    (9, 2, 11, '2024-02-12', '2024-03-04', '2024-02-19', 0.0),
    (10, 12, 5, '2024-02-15', '2024-03-07', NULL, 0.0),
    (11, 21, 1, '2024-02-20', '2024-03-12', '2024-03-07', 0.0),
    (12, 32, 10, '2024-02-24', '2024-03-16', '2024-03-13', 0.0),
    (13, 22, 13, '2024-02-29', '2024-03-21', '2024-03-04', 0.0),
    (14, 3, 6, '2024-03-03', '2024-03-24', '2024-03-19', 0.0),
    (15, 10, 11, '2024-03-08', '2024-03-29', '2024-03-17', 0.0),
    (16, 24, 9, '2024-03-14', '2024-04-04', '2024-04-06', 0.5),
    (17, 1, 3, '2024-03-20', '2024-04-10', '2024-04-18', 2.0),
    (18, 23, 13, '2024-03-27', '2024-04-17', '2024-04-25', 2.0),
    (19, 22, 15, '2024-04-02', '2024-04-23', '2024-04-25', 0.5),
    (20, 7, 3, '2024-04-06', '2024-04-27', '2024-05-05', 2.0),
    (21, 10, 13, '2024-04-10', '2024-05-01', '2024-04-21', 0.0),
    (22, 32, 6, '2024-04-16', '2024-05-07', '2024-04-30', 0.0),
    (23, 9, 11, '2024-04-23', '2024-05-14', '2024-05-18', 1.0),
    (24, 31, 14, '2024-04-30', '2024-05-21', '2024-05-07', 0.0),
    (25, 1, 12, '2024-05-04', '2024-05-25', '2024-05-25', 0.0),
    (26, 21, 11, '2024-05-09', '2024-05-30', '2024-06-12', 3.25),
    (27, 22, 13, '2024-05-15', '2024-06-05', '2024-06-07', 0.5),
    (28, 10, 9, '2024-05-21', '2024-06-11', NULL, 0.0),
    (29, 3, 19, '2024-05-28', '2024-06-18', '2024-06-08', 0.0),
    (30, 24, 9, '2024-05-31', '2024-06-21', '2024-06-18', 0.0),
    (31, 26, 4, '2024-06-07', '2024-06-28', '2024-06-25', 0.0),
    (32, 22, 13, '2024-06-12', '2024-07-03', '2024-06-26', 0.0),
    (33, 2, 1, '2024-06-18', '2024-07-09', '2024-06-29', 0.0),
    (34, 24, 11, '2024-06-21', '2024-07-12', '2024-07-17', 1.25),
    (35, 32, 4, '2024-06-26', '2024-07-17', '2024-07-08', 0.0),
    (36, 28, 12, '2024-07-01', '2024-07-22', '2024-07-27', 1.25),
    (37, 15, 15, '2024-07-08', '2024-07-29', '2024-07-29', 0.0),
    (38, 31, 3, '2024-07-13', '2024-08-03', NULL, 0.0),
    (39, 20, 7, '2024-07-16', '2024-08-06', '2024-08-03', 0.0),
    (40, 14, 4, '2024-07-23', '2024-08-13', '2024-08-08', 0.0),
    (41, 9, 11, '2024-07-27', '2024-08-17', '2024-08-21', 1.0),
    (42, 24, 11, '2024-07-30', '2024-08-20', '2024-08-19', 0.0),
    (43, 6, 6, '2024-08-03', '2024-08-24', '2024-08-26', 0.5),
    (44, 2, 13, '2024-08-06', '2024-08-27', '2024-08-15', 0.0),
    (45, 18, 7, '2024-08-13', '2024-09-03', '2024-08-31', 0.0),
    (46, 28, 17, '2024-08-20', '2024-09-10', '2024-09-12', 0.5),
    (47, 17, 1, '2024-08-26', '2024-09-16', '2024-09-18', 0.5),
    (48, 11, 15, '2024-08-29', '2024-09-19', '2024-09-14', 0.0),
    (49, 18, 1, '2024-09-03', '2024-09-24', '2024-09-24', 0.0),
    (50, 32, 5, '2024-09-08', '2024-09-29', NULL, 0.0),
    (51, 22, 4, '2024-09-13', '2024-10-04', '2024-09-22', 0.0),
    (52, 14, 6, '2024-09-20', '2024-10-11', '2024-09-29', 0.0),
    (53, 2, 6, '2024-09-26', '2024-10-17', '2024-09-30', 0.0),
    (54, 26, 2, '2024-10-01', '2024-10-22', '2024-11-04', 3.25),
    (55, 23, 5, '2024-10-07', '2024-10-28', '2024-11-10', 3.25),
    (56, 28, 4, '2024-10-11', '2024-11-01', '2024-11-14', 3.25),
    (57, 11, 10, '2024-10-18', '2024-11-08', '2024-10-25', 0.0),
    (58, 14, 11, '2024-10-25', '2024-11-15', '2024-11-05', 0.0),
    (59, 13, 4, '2024-10-31', '2024-11-21', '2024-11-07', 0.0),
    (60, 1, 7, '2024-11-06', '2024-11-27', '2024-11-17', 0.0),
    (61, 26, 16, '2024-11-11', '2024-12-02', NULL, 0.0),
    (62, 14, 2, '2024-11-15', '2024-12-06', NULL, 0.0),
    (63, 23, 2, '2024-11-20', '2024-12-11', NULL, 0.0),
    (64, 9, 8, '2024-11-24', '2024-12-15', NULL, 0.0);
